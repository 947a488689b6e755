/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/docker.c - the Docker backend's operations (see docker.h and docker_int.h):
 * their allocation, completion and release, the checks they share, ping, has_image, remove and
 * ensure_network, and the launcher's creation and close. The operations on a container's files
 * are in docker_files.c, creating, running commands in and listing containers in
 * docker_containers.c, pulling images in docker_pull.c, the inner wall in docker_wall.c.
 */
#include "control/sandbox/docker.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>
#include <uv.h>

#include "base/buf.h"
#include "base/mem.h"
#include "control/sandbox/docker_int.h"

#define NAME_MAX_LEN 128u
#define PATH_MAX_LEN 4096u

static void shutdown_launcher(struct sl_docker *d);

/* ---------------------------------------------------------------------------------------- */
/* Small helpers. */

void sl__docker_set_err(struct sl__docker_op *o, int rc, const char *fmt, ...)
{
    va_list ap;

    o->rc = rc;
    va_start(ap, fmt);
    (void)vsnprintf(o->err, sizeof(o->err), fmt, ap);
    va_end(ap);
    /* One line: the daemon's text may carry anything. */
    for (char *p = o->err; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            *p = ' ';
        }
    }
}

/* Docker names and ids: [A-Za-z0-9][A-Za-z0-9_.-]*, bounded. */
bool sl__docker_is_name(const char *s)
{
    size_t n;

    if (s == NULL) {
        return false;
    }
    n = strlen(s);
    if (n == 0 || n > NAME_MAX_LEN || strchr("_.-", s[0]) != NULL) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'
              || c == '.' || c == '-')) {
            return false;
        }
    }
    return true;
}

/* An absolute path without empty, `.` or `..` components (a trailing '/' is refused too):
 * launcher.h. */
bool sl_launcher_path_ok(const char *s)
{
    const char *p;

    if (s == NULL || s[0] != '/' || strlen(s) > PATH_MAX_LEN) {
        return false;
    }
    if (s[1] == '\0') {
        return true;
    }
    p = s + 1;
    for (;;) {
        const char *e = strchr(p, '/');
        size_t n = e != NULL ? (size_t)(e - p) : strlen(p);

        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
            return false;
        }
        if (e == NULL) {
            return true;
        }
        p = e + 1;
    }
}

/* NAME=value with a non-empty name. */
bool sl__docker_is_env(const char *s)
{
    return s != NULL && s[0] != '=' && strchr(s, '=') != NULL;
}

/* Returns a new copy of `j` compact-serialised in sl_malloc memory, or NULL. */
char *sl__docker_dump_json(const json_t *j, size_t *len)
{
    size_t n = json_dumpb(j, NULL, 0, JSON_COMPACT);
    char *s;

    if (n == 0) {
        return NULL;
    }
    s = sl_malloc(n + 1);
    if (s == NULL) {
        return NULL;
    }
    if (json_dumpb(j, s, n, JSON_COMPACT) != n) {
        sl_free(s);
        return NULL;
    }
    s[n] = '\0';
    *len = n;
    return s;
}

const char *sl__docker_json_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

/* ---------------------------------------------------------------------------------------- */
/* Operations: allocation, completion, release. */

static void on_op_closed(uv_handle_t *h)
{
    struct sl__docker_op *o = SL_CONTAINER_OF((uv_timer_t *)h, struct sl__docker_op, timer);
    struct sl_docker *d = o->d;

    sl__docker_wall_release(o);
    sl__docker_pull_release(o);
    sl_free(o->host);
    sl_free(o->service);
    sl_free(o->cid);
    for (size_t i = 0; i < o->n_configs; i++) {
        sl_free(o->configs[i].name);
        sl_free(o->configs[i].id);
        sl_free(o->configs[i].data);
        sl_free(o->configs[i].req);
    }
    sl_buf_finish(&o->resp);
    sl_buf_finish(&o->out);
    sl_buf_finish(&o->errout);
    sl_free(o->id);
    sl_free(o->path);
    sl_free(o->link_target);
    sl_free(o->dir);
    sl_free(o->name);
    sl_free(o->body);
    sl_free(o->tar);
    sl_free(o->bridge);
    sl_free(o->subnet);
    sl_free(o->gateway);
    sl_free(o->network);
    sl_free(o->exec_id);
    sl_free(o->data);
    json_decref(o->ids);
    json_decref(o->found);
    sl_free(o);
    sl__docker_maybe_freed(d);
}

static void deliver(struct sl__docker_op *o)
{
    const char *err = o->rc < 0 ? o->err : NULL;
    struct sl_launcher_exec_result r;

    switch (o->kind) {
    case SL__DOCKER_OP_PING:
    case SL__DOCKER_OP_NETWORK:
    case SL__DOCKER_OP_IMAGE:
    case SL__DOCKER_OP_WRITE:
    case SL__DOCKER_OP_REMOVE:
    case SL__DOCKER_OP_EGRESS:
        o->cb.done(o->arg, o->rc, err);
        break;
    case SL__DOCKER_OP_CREATE:
        o->cb.started(o->arg, o->rc, err, o->rc == 0 ? o->id : NULL, o->rc == 0 ? o->ip : NULL);
        break;
    case SL__DOCKER_OP_EXEC:
        r = (struct sl_launcher_exec_result){
            .rc = o->rc,
            .err = err,
            .exit_code = o->rc == 0 ? o->exit_code : -1,
            .out = sl_buf_cstr(&o->out),
            .out_len = o->out.len,
            .errout = sl_buf_cstr(&o->errout),
            .errout_len = o->errout.len,
            .out_truncated = o->out_truncated,
            .err_truncated = o->err_truncated,
            .deadline_passed = o->deadline_passed,
        };
        o->cb.exec(o->arg, &r);
        break;
    case SL__DOCKER_OP_STAT:
        o->cb.stat(o->arg, o->rc, err, o->is_dir, o->size);
        break;
    case SL__DOCKER_OP_READ:
        if (o->rc == SL_ETOOBIG) {
            o->cb.read(o->arg, o->rc, err, NULL, (size_t)o->size);
        } else {
            o->cb.read(o->arg, o->rc, err, o->rc == 0 ? (const void *)o->data : NULL,
                       o->rc == 0 ? o->data_len : 0);
        }
        break;
    case SL__DOCKER_OP_LIST:
        sl__docker_deliver_list(o);
        break;
    case SL__DOCKER_OP_PULL:
        o->cb.pulled(o->arg, o->rc,
                     o->rc == 0                           ? SL_LAUNCHER_PULL_OK
                     : o->pull_why != SL_LAUNCHER_PULL_OK ? o->pull_why
                                                          : SL_LAUNCHER_PULL_RUNTIME,
                     err);
        break;
    }
}

/* Reports the outcome once and releases the operation (freed after its timer closes). */
void sl__docker_op_finish(struct sl__docker_op *o)
{
    if (o->finished) {
        return;
    }
    o->finished = true;
    sl__docker_drop_transfer(o);
    sl_list_remove(&o->link);
    deliver(o);
    uv_close((uv_handle_t *)&o->timer, on_op_closed);
}

static void on_op_deferred(uv_timer_t *t)
{
    sl__docker_op_finish(SL_CONTAINER_OF(t, struct sl__docker_op, timer));
}

void sl__docker_op_finish_soon(struct sl__docker_op *o)
{
    (void)uv_timer_start(&o->timer, on_op_deferred, 0, 0);
}

/* Completes `o` with its recorded error from the loop, never from the caller's stack. */
void sl__docker_fail_soon(struct sl__docker_op *o)
{
    sl__docker_drop_transfer(o);
    sl__docker_op_finish_soon(o);
}

static void on_oom_timer(uv_timer_t *t)
{
    struct sl_docker *d = t->data;
    static const char msg[] = "docker: out of memory";

    while (d->n_oom > 0) {
        struct sl__docker_oom_note n = d->oom[--d->n_oom];

        switch (n.kind) {
        case SL__DOCKER_OP_PING:
        case SL__DOCKER_OP_NETWORK:
        case SL__DOCKER_OP_IMAGE:
        case SL__DOCKER_OP_WRITE:
        case SL__DOCKER_OP_REMOVE:
        case SL__DOCKER_OP_EGRESS:
            n.cb.done(n.arg, SL_ENOMEM, msg);
            break;
        case SL__DOCKER_OP_CREATE:
            n.cb.started(n.arg, SL_ENOMEM, msg, NULL, NULL);
            break;
        case SL__DOCKER_OP_EXEC: {
            struct sl_launcher_exec_result r = {
                .rc = SL_ENOMEM, .err = msg, .exit_code = -1, .out = "", .errout = ""
            };

            n.cb.exec(n.arg, &r);
            break;
        }
        case SL__DOCKER_OP_STAT:
            n.cb.stat(n.arg, SL_ENOMEM, msg, false, 0);
            break;
        case SL__DOCKER_OP_READ:
            n.cb.read(n.arg, SL_ENOMEM, msg, NULL, 0);
            break;
        case SL__DOCKER_OP_LIST:
            n.cb.list(n.arg, SL_ENOMEM, msg, NULL, 0);
            break;
        case SL__DOCKER_OP_PULL:
            n.cb.pulled(n.arg, SL_ENOMEM, SL_LAUNCHER_PULL_RUNTIME, msg);
            break;
        }
    }
}

/*
 * Allocates an operation of `kind` with a control deadline, linked into the launcher. On OOM
 * the callback is still reported from the loop (SL_ENOMEM) and NULL is returned. A launcher
 * that is closing gets an operation that completes with SL_ECANCELED; the caller sees
 * o->rc < 0 and must not start anything.
 */
struct sl__docker_op *sl__docker_op_new(struct sl_docker *d, enum sl__docker_op_kind kind,
                                        union sl__docker_op_cb cb, void *arg)
{
    struct sl__docker_op *o = sl_calloc(1, sizeof(*o));

    if (o == NULL) {
        SL_BUG_ON(d->n_oom == SL__DOCKER_OOM_NOTES);
        d->oom[d->n_oom++] = (struct sl__docker_oom_note){ kind, cb, arg };
        (void)uv_timer_start(&d->oom_timer, on_oom_timer, 0, 0);
        return NULL;
    }
    o->d = d;
    o->kind = kind;
    if (d->route != NULL) {
        o->host = sl_strdup(d->route);
        if (o->host == NULL) {
            sl__docker_set_err(o, SL_ENOMEM, "docker: out of memory");
        }
    }
    o->cb = cb;
    o->arg = arg;
    o->exit_code = -1;
    o->deadline_ms = uv_now(d->loop) + SL__DOCKER_DEADLINE_MS;
    sl_buf_init(&o->resp, SL__DOCKER_BODY_MAX);
    sl_buf_init(&o->out, 0);
    sl_buf_init(&o->errout, 0);
    sl_dockerframe_init(&o->frames);
    /* A timer init on a live loop cannot fail. */
    (void)uv_timer_init(d->loop, &o->timer);
    sl_list_push_front(&d->ops, &o->link);
    /* Released in on_op_closed(): the launcher outlives its operations' timers. */
    d->pending_closes++;
    if (d->closing) {
        sl__docker_set_err(o, SL_ECANCELED, "docker: the launcher is closing");
        sl__docker_fail_soon(o);
    } else if (o->rc < 0) {
        sl__docker_fail_soon(o);
    }
    return o;
}

struct sl__docker_op *sl__docker_op_on(struct sl_launcher *l, const char *id,
                                       enum sl__docker_op_kind kind, union sl__docker_op_cb cb,
                                       void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, kind, cb, arg);

    if (o == NULL || o->rc < 0) {
        return NULL;
    }
    if (!sl__docker_is_name(id)) {
        sl__docker_reject(o, "docker: invalid container id");
        return NULL;
    }
    return o;
}

/* Fails `o` from the loop with a validation error. */
void sl__docker_reject(struct sl__docker_op *o, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(o->err, sizeof(o->err), fmt, ap);
    va_end(ap);
    o->rc = SL_EINVAL;
    sl__docker_fail_soon(o);
}

/* Starts a request or, when that failed, completes `o` with its error from the loop. */
void sl__docker_go(struct sl__docker_op *o, int rc)
{
    if (rc < 0) {
        sl__docker_fail_soon(o);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* ping, has_image, remove. */

static void on_ping(struct sl__docker_op *o)
{
    (void)sl__docker_check_response(o, "ping", 200, 200);
    sl__docker_op_finish(o);
}

static void docker_ping(struct sl_launcher *l, sl_launcher_done_fn *cb, void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_PING,
                                                (union sl__docker_op_cb){ .done = cb }, arg);

    if (o == NULL || o->rc < 0) {
        return;
    }
    sl__docker_go(o, sl__docker_start_request(o, "GET", "/_ping", NULL, 0, NULL, 4096, on_ping));
}

static void on_image(struct sl__docker_op *o)
{
    (void)sl__docker_check_response(o, "inspect image", 200, 200);
    sl__docker_op_finish(o);
}

static void docker_has_image(struct sl_launcher *l, const char *image, sl_launcher_done_fn *cb,
                             void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_IMAGE,
                                                (union sl__docker_op_cb){ .done = cb }, arg);
    struct sl_buf path;
    int rc;

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (image == NULL || image[0] == '\0' || strlen(image) > 512) {
        sl__docker_reject(o, "docker: an image name must be 1-512 characters");
        return;
    }
    sl_buf_init(&path, SL__DOCKER_URL_MAX);
    rc = sl_buf_append_str(&path, "/images/");
    rc = rc < 0 ? rc : sl__docker_append_escaped(&path, image);
    rc = rc < 0 ? rc : sl_buf_append_str(&path, "/json");
    if (rc < 0) {
        sl__docker_set_err(o, rc, "docker: cannot build the request: %s", sl_strerror(rc));
        sl__docker_fail_soon(o);
    } else {
        sl__docker_go(o, sl__docker_start_request(o, "GET", sl_buf_cstr(&path), NULL, 0, NULL,
                                                  SL__DOCKER_BODY_MAX, on_image));
    }
    sl_buf_finish(&path);
}

static void on_removed(struct sl__docker_op *o)
{
    (void)sl__docker_check_response(o, "remove container", 204, 404);
    sl__docker_op_finish(o);
}

static void docker_remove(struct sl_launcher *l, const char *id, sl_launcher_done_fn *cb, void *arg)
{
    struct sl__docker_op *o = sl__docker_op_on(l, id, SL__DOCKER_OP_REMOVE,
                                               (union sl__docker_op_cb){ .done = cb }, arg);

    if (o == NULL) {
        return;
    }
    sl__docker_go(o, sl__docker_start_requestf(o, "DELETE", NULL, 0, NULL, SL__DOCKER_BODY_MAX,
                                               on_removed, "/containers/%s?force=true&v=true", id));
}

/* ---------------------------------------------------------------------------------------- */
/* ensure_network. */

static void on_network_created(struct sl__docker_op *o);

/* Compares an existing network with the one asked for; sets the error naming a difference. */
static int verify_network(struct sl__docker_op *o, const json_t *n)
{
    const json_t *opts = json_object_get(n, "Options");
    const char *icc = sl__docker_json_str(opts, "com.docker.network.bridge.enable_icc");
    const char *bridge = sl__docker_json_str(opts, "com.docker.network.bridge.name");
    const char *driver = sl__docker_json_str(n, "Driver");
    const json_t *cfgs = json_object_get(json_object_get(n, "IPAM"), "Config");
    const json_t *cfg;
    size_t i;
    bool subnet_ok = false;
    bool gateway_ok = false;

    if (driver == NULL || strcmp(driver, "bridge") != 0) {
        sl__docker_set_err(o, SL_EEXIST, "docker: network %s exists with driver %.64s, not bridge",
                           o->name, driver != NULL ? driver : "(none)");
        return o->rc;
    }
    if (!json_is_true(json_object_get(n, "Internal"))) {
        sl__docker_set_err(o, SL_EEXIST, "docker: network %s exists but is not internal", o->name);
        return o->rc;
    }
    if (icc == NULL || strcmp(icc, "false") != 0) {
        sl__docker_set_err(o, SL_EEXIST,
                           "docker: network %s exists with inter-container communication on "
                           "(com.docker.network.bridge.enable_icc is not false)",
                           o->name);
        return o->rc;
    }
    if (bridge == NULL || strcmp(bridge, o->bridge) != 0) {
        sl__docker_set_err(o, SL_EEXIST, "docker: network %s exists with bridge %.64s, not %s",
                           o->name, bridge != NULL ? bridge : "(unnamed)", o->bridge);
        return o->rc;
    }
    json_array_foreach(cfgs, i, cfg)
    {
        const char *s = sl__docker_json_str(cfg, "Subnet");
        const char *g = sl__docker_json_str(cfg, "Gateway");

        if (s != NULL && strcmp(s, o->subnet) == 0) {
            subnet_ok = true;
            gateway_ok = g == NULL || g[0] == '\0' || strcmp(g, o->gateway) == 0;
        }
    }
    if (!subnet_ok) {
        cfg = json_array_get(cfgs, 0);
        sl__docker_set_err(
                o, SL_EEXIST, "docker: network %s exists with subnet %.64s, not %s", o->name,
                sl__docker_json_str(cfg, "Subnet") != NULL ? sl__docker_json_str(cfg, "Subnet")
                                                           : "(none)",
                o->subnet);
        return o->rc;
    }
    if (!gateway_ok) {
        sl__docker_set_err(o, SL_EEXIST, "docker: network %s exists with another gateway than %s",
                           o->name, o->gateway);
        return o->rc;
    }
    return 0;
}

static int create_network(struct sl__docker_op *o)
{
    json_t *j = json_pack(
            "{s:s, s:b, s:s, s:b, s:b, s:b, s:{s:s, s:[{s:s, s:s}]}, "
            "s:{s:s, s:s}, s:{s:s}}",
            "Name", o->name, "CheckDuplicate", 1, "Driver", "bridge", "Internal", 1, "Attachable",
            0, "EnableIPv6", 0, "IPAM", "Driver", "default", "Config", "Subnet", o->subnet,
            "Gateway", o->gateway, "Options", "com.docker.network.bridge.name", o->bridge,
            "com.docker.network.bridge.enable_icc", "false", "Labels", "sluice.managed", "1");

    sl_free(o->body);
    o->body = j != NULL ? sl__docker_dump_json(j, &o->body_len) : NULL;
    json_decref(j);
    if (o->body == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: cannot build the network request");
        return o->rc;
    }
    return sl__docker_start_request(o, "POST", "/networks/create", o->body, o->body_len,
                                    "application/json", SL__DOCKER_BODY_MAX, on_network_created);
}

static void on_network(struct sl__docker_op *o)
{
    json_t *n;
    const char *name;

    if (sl__docker_check_response(o, "inspect network", 200, 200) == SL_ENOTFOUND) {
        o->rc = 0;
        o->err[0] = '\0';
        sl__docker_go(o, create_network(o));
        return;
    }
    if (o->rc < 0) {
        sl__docker_op_finish(o);
        return;
    }
    n = sl__docker_response_object(o, "inspect network");
    name = sl__docker_json_str(n, "Name");
    if (n != NULL && (name == NULL || strcmp(name, o->name) != 0)) {
        /* The daemon matched the name as an id prefix of another network. */
        json_decref(n);
        sl__docker_go(o, create_network(o));
        return;
    }
    if (n != NULL) {
        (void)verify_network(o, n);
    }
    json_decref(n);
    sl__docker_op_finish(o);
}

static void on_network_created(struct sl__docker_op *o)
{
    if (sl__docker_check_response(o, "create network", 201, 201) < 0 && o->status == 409
        && !o->retried) {
        /* Created by someone else meanwhile: check that one. */
        o->rc = 0;
        o->retried = true;
        sl__docker_go(o, sl__docker_start_requestf(o, "GET", NULL, 0, NULL, SL__DOCKER_BODY_MAX,
                                                   on_network, "/networks/%s", o->name));
        return;
    }
    sl__docker_op_finish(o);
}

bool sl__docker_is_ip_text(const char *s, size_t max)
{
    size_t n = s != NULL ? strlen(s) : 0;

    if (n == 0 || n > max) {
        return false;
    }
    return strspn(s, "0123456789abcdefABCDEF.:/") == n;
}

static void docker_ensure_network(struct sl_launcher *l, const struct sl_launcher_network *net,
                                  sl_launcher_done_fn *cb, void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_NETWORK,
                                                (union sl__docker_op_cb){ .done = cb }, arg);

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (net == NULL || !sl__docker_is_name(net->name)) {
        sl__docker_reject(o, "docker: invalid network name");
        return;
    }
    if (!sl__docker_is_name(net->bridge) || strlen(net->bridge) > 15) {
        sl__docker_reject(o, "docker: invalid bridge name (1-15 characters of [A-Za-z0-9_.-])");
        return;
    }
    if (!sl__docker_is_ip_text(net->subnet, 64) || strchr(net->subnet, '/') == NULL
        || !sl__docker_is_ip_text(net->gateway, 64) || strchr(net->gateway, '/') != NULL) {
        sl__docker_reject(o, "docker: invalid subnet or gateway");
        return;
    }
    o->name = sl_strdup(net->name);
    o->bridge = sl_strdup(net->bridge);
    o->subnet = sl_strdup(net->subnet);
    o->gateway = sl_strdup(net->gateway);
    if (o->name == NULL || o->bridge == NULL || o->subnet == NULL || o->gateway == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: out of memory");
        sl__docker_fail_soon(o);
        return;
    }
    sl__docker_go(o, sl__docker_start_requestf(o, "GET", NULL, 0, NULL, SL__DOCKER_BODY_MAX,
                                               on_network, "/networks/%s", o->name));
}

/* ---------------------------------------------------------------------------------------- */
/* close and create. */

static void on_oom_timer_closed(uv_handle_t *h)
{
    sl__docker_maybe_freed(h->data);
}

/* Cleans up libcurl and closes the launcher's handles; the memory goes with the last close. */
static void shutdown_launcher(struct sl_docker *d)
{
    if (d->shut) {
        return;
    }
    d->shut = true;
    /* Launches that could not allocate are reported now: their timer is about to close. */
    if (d->n_oom > 0) {
        on_oom_timer(&d->oom_timer);
    }
    sl__docker_http_shutdown(d);
    d->pending_closes++;
    uv_close((uv_handle_t *)&d->oom_timer, on_oom_timer_closed);
    /* The count started at 1 for the launcher itself. */
    sl__docker_maybe_freed(d);
}

static void docker_close(struct sl_launcher *l, void (*closed)(void *arg), void *arg)
{
    struct sl_docker *d = (struct sl_docker *)l;

    if (d->closing) {
        return;
    }
    d->closing = true;
    d->closed = closed;
    d->closed_arg = arg;
    for (struct sl_list *it = d->ops.next; it != &d->ops; it = it->next) {
        struct sl__docker_op *o = SL_CONTAINER_OF(it, struct sl__docker_op, link);

        (void)uv_timer_stop(&o->timer);
        sl__docker_set_err(o, SL_ECANCELED, "docker: the launcher is closing");
        sl__docker_fail_soon(o);
    }
    /* Every transfer is gone; the operations report from their timers, and `closed` runs
     * after the last of them (sl__docker_maybe_freed). */
    shutdown_launcher(d);
}

const struct sl_launcher_ops sl__docker_ops = {
    .ping = docker_ping,
    .ensure_network = docker_ensure_network,
    .has_image = docker_has_image,
    .pull_image = sl__docker_pull_image,
    .create_and_start = sl__docker_create_and_start,
    .set_egress = sl__docker_set_egress,
    .exec = sl__docker_exec,
    .stat = sl__docker_stat,
    .read_file = sl__docker_read_file,
    .write_file = sl__docker_write_file,
    .remove = docker_remove,
    .list = sl__docker_list,
    .close = docker_close,
};

/* Allocates a launcher on `loop` with libcurl set up: *out, or SL_ENOMEM / SL_EIO with nothing
 * left. The caller fills in where its engine is. */
int sl__docker_alloc(uv_loop_t *loop, const struct sl_launcher_ops *ops, struct sl_docker **out)
{
    struct sl_docker *d;

    SL_ENSURE(sodium_init() >= 0, SL_ECRYPTO);
    d = sl_calloc(1, sizeof(*d));
    if (d == NULL) {
        return SL_ENOMEM;
    }
    d->loop = loop;
    sl_list_init(&d->ops);
    sl_list_init(&d->socks);
    if (sl__docker_http_init(d) < 0) {
        sl_free(d);
        return SL_EIO;
    }
    d->base.ops = ops;
    /* A timer init on a live loop cannot fail. */
    (void)uv_timer_init(loop, &d->oom_timer);
    d->oom_timer.data = d;
    d->pending_closes = 1;
    *out = d;
    return 0;
}

void sl__docker_free_unused(struct sl_docker *d)
{
    shutdown_launcher(d);
}

int sl_docker_launcher_create(uv_loop_t *loop, const char *socket_path, struct sl_launcher **out)
{
    struct sl_docker *d;
    size_t n = socket_path != NULL ? strlen(socket_path) : 0;

    SL_ENSURE(loop != NULL && out != NULL, SL_EINVAL);
    SL_ENSURE(n > 0 && n <= SL__DOCKER_SOCKET_PATH_MAX, SL_EINVAL);
    SL_TRY(sl__docker_alloc(loop, &sl__docker_ops, &d));
    memcpy(d->socket_path, socket_path, n + 1);
    *out = &d->base;
    return 0;
}

bool sl__docker_tls_ok(const struct sl_docker_tls *t)
{
    struct in_addr a;

    return !(t == NULL || t->host == NULL || inet_pton(AF_INET, t->host, &a) != 1 || t->port == 0
             || t->ca_file == NULL || t->ca_file[0] == '\0' || t->cert_file == NULL
             || t->cert_file[0] == '\0' || t->key_file == NULL || t->key_file[0] == '\0'
             || (t->wall_image != NULL
                 && (t->wall_image[0] == '\0' || strlen(t->wall_image) > 512)));
}

int sl__docker_set_tls(struct sl_docker *d, const struct sl_docker_tls *t)
{
    char origin[128];

    (void)snprintf(origin, sizeof(origin), "https://%s:%u", t->host, (unsigned)t->port);
    d->origin = sl_strdup(origin);
    d->ca_file = sl_strdup(t->ca_file);
    d->cert_file = sl_strdup(t->cert_file);
    d->key_file = sl_strdup(t->key_file);
    d->wall_image = t->wall_image != NULL ? sl_strdup(t->wall_image) : NULL;
    d->port = t->port;
    if (d->origin == NULL || d->ca_file == NULL || d->cert_file == NULL || d->key_file == NULL
        || (t->wall_image != NULL && d->wall_image == NULL)) {
        return SL_ENOMEM;
    }
    return 0;
}

int sl_docker_launcher_create_tls(uv_loop_t *loop, const struct sl_docker_tls *t,
                                  struct sl_launcher **out)
{
    struct sl_docker *d;
    int rc;

    SL_ENSURE(loop != NULL && out != NULL && sl__docker_tls_ok(t), SL_EINVAL);
    SL_TRY(sl__docker_alloc(loop, &sl__docker_ops, &d));
    rc = sl__docker_set_tls(d, t);
    if (rc < 0) {
        sl__docker_free_unused(d);
        return rc;
    }
    *out = &d->base;
    return 0;
}
