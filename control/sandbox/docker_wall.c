/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/docker_wall.c - the Docker backend's inner wall (launcher.h egress,
 * docs/reference/containers.md §5.4): the container's network namespace is the file Docker names
 * in NetworkSettings.SandboxKey of its inspect (a bind mount of the namespace, so no process id
 * that could be reused stands in between), and control/sandbox/firewall installs the rules in
 * it, on libuv's thread pool (netlink blocks). An engine on another host (a launcher over TLS,
 * control/sandbox/swarm) cannot be entered so: there a helper container sharing the container's
 * namespace installs it (below). Used by create_and_start after the start (both backends'
 * creates share the step from the inspect to the wall: sl__docker_address_then_wall) and by
 * set_egress. See docker.h and docker_int.h.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include <jansson.h>
#include <uv.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "control/sandbox/docker.h"
#include "control/sandbox/docker_int.h"
#include "control/sandbox/firewall.h"

/* The most ports of one protocol a wall takes (every port there is). */
#define PORTS_MAX 65535u

/* One install on the thread pool, owned by its operation until it is queued; from then on it
 * frees itself when the operation went away first. */
struct sl__docker_wall {
    uv_work_t work;
    /* The operation waiting for it; NULL once that was released (the work then frees itself). */
    struct sl__docker_op *o;
    /* What runs on the loop when the install ended, with o->rc and o->err set. */
    void (*done)(struct sl__docker_op *o);
    bool queued;
    /* The wall: owned copies. */
    char gateway[INET_ADDRSTRLEN];
    uint16_t *tcp;
    size_t n_tcp;
    uint16_t *udp;
    size_t n_udp;
    /* The namespace's file, from the inspect. Owned. */
    char *netns;
    /* On an engine of another host: the helper container that installs the wall, once
     * created ("" before). */
    char helper[72];
    /* The outcome, written by the pool thread, read on the loop after it. */
    int rc;
    char err[SL__DOCKER_ERR_MAX];
};

static void wall_free(struct sl__docker_wall *w)
{
    sl_free(w->tcp);
    sl_free(w->udp);
    sl_free(w->netns);
    sl_free(w);
}

static uint16_t *copy_ports(const uint16_t *p, size_t n, bool *ok)
{
    uint16_t *c;

    if (n == 0) {
        return NULL;
    }
    c = sl_calloc(n, sizeof(*c));
    if (c == NULL) {
        *ok = false;
        return NULL;
    }
    memcpy(c, p, n * sizeof(*c));
    return c;
}

int sl__docker_wall_prepare(struct sl__docker_op *o, const struct sl_launcher_egress *e)
{
    struct in_addr a;
    struct sl__docker_wall *w;
    bool ok = true;

    if (e == NULL || e->address == NULL || inet_pton(AF_INET, e->address, &a) != 1) {
        sl__docker_set_err(o, SL_EINVAL, "docker: the inner wall needs an IPv4 address");
        return o->rc;
    }
    if (e->n_tcp_ports > PORTS_MAX || e->n_udp_ports > PORTS_MAX
        || (e->n_tcp_ports > 0 && e->tcp_ports == NULL)
        || (e->n_udp_ports > 0 && e->udp_ports == NULL)) {
        sl__docker_set_err(o, SL_EINVAL, "docker: the inner wall's ports are malformed");
        return o->rc;
    }
    for (size_t i = 0; i < e->n_tcp_ports + e->n_udp_ports; i++) {
        if ((i < e->n_tcp_ports ? e->tcp_ports[i] : e->udp_ports[i - e->n_tcp_ports]) == 0) {
            sl__docker_set_err(o, SL_EINVAL, "docker: a port of the inner wall must be 1-65535");
            return o->rc;
        }
    }
    w = sl_calloc(1, sizeof(*w));
    if (w == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: out of memory");
        return o->rc;
    }
    (void)inet_ntop(AF_INET, &a, w->gateway, sizeof(w->gateway));
    w->tcp = copy_ports(e->tcp_ports, e->n_tcp_ports, &ok);
    w->n_tcp = e->n_tcp_ports;
    w->udp = copy_ports(e->udp_ports, e->n_udp_ports, &ok);
    w->n_udp = e->n_udp_ports;
    if (!ok) {
        wall_free(w);
        sl__docker_set_err(o, SL_ENOMEM, "docker: out of memory");
        return o->rc;
    }
    w->o = o;
    o->wall = w;
    return 0;
}

int sl__docker_wall_set_address(struct sl__docker_op *o, const char *address)
{
    struct in_addr a;

    SL_BUG_ON(o->wall == NULL);
    if (address == NULL || inet_pton(AF_INET, address, &a) != 1) {
        sl__docker_set_err(o, SL_EINVAL, "docker: the inner wall needs an IPv4 address");
        return o->rc;
    }
    (void)inet_ntop(AF_INET, &a, o->wall->gateway, sizeof(o->wall->gateway));
    return 0;
}

void sl__docker_wall_release(struct sl__docker_op *o)
{
    struct sl__docker_wall *w = o->wall;

    o->wall = NULL;
    if (w == NULL) {
        return;
    }
    if (w->queued) {
        /* The pool still has it: it frees itself when it is done. */
        w->o = NULL;
        return;
    }
    wall_free(w);
}

static void on_wall_work(uv_work_t *req)
{
    struct sl__docker_wall *w = SL_CONTAINER_OF(req, struct sl__docker_wall, work);
    const struct sl_firewall_wall fw = {
        .gateway = w->gateway,
        .tcp_ports = w->tcp,
        .n_tcp_ports = w->n_tcp,
        .udp_ports = w->udp,
        .n_udp_ports = w->n_udp,
    };

    w->rc = sl_firewall_wall_install(w->netns, &fw, w->err, sizeof(w->err));
}

static void on_wall_done(uv_work_t *req, int status)
{
    struct sl__docker_wall *w = SL_CONTAINER_OF(req, struct sl__docker_wall, work);
    struct sl__docker_op *o = w->o;

    w->queued = false;
    if (o == NULL) {
        wall_free(w);
        return;
    }
    if (status < 0) {
        sl__docker_set_err(o, SL_EIO, "docker: the inner wall was not installed: %s",
                           uv_strerror(status));
    } else if (w->rc < 0) {
        /* firewall's message, which starts "firewall: ". */
        sl__docker_set_err(o, w->rc, "docker: %s", w->err);
    } else {
        o->rc = 0;
        o->err[0] = '\0';
    }
    w->done(o);
}

/* ---- the wall on another host's engine: a helper container ----------------------------------
 *
 * The control plane cannot enter a network namespace on another machine, and an exec in the
 * container itself cannot have CAP_NET_ADMIN (its bounding set lacks it, as it must). So a
 * short-lived container of d->wall_image joins the container's network namespace
 * (NetworkMode container:ID) with CAP_NET_ADMIN alone and runs `sluice wall`, which installs the
 * same table through control/sandbox/firewall in its own (that) namespace: create, start, wait
 * for its exit status, its error stream when that is not 0, and remove it. */

static void remote_finish(struct sl__docker_op *o)
{
    struct sl__docker_wall *w = o->wall;

    o->rc = w->rc;
    memcpy(o->err, w->err, sizeof(o->err));
    sl_buf_truncate(&o->out, 0);
    sl_buf_truncate(&o->errout, 0);
    w->done(o);
}

static void on_helper_removed(struct sl__docker_op *o)
{
    struct sl__docker_wall *w = o->wall;

    if (sl__docker_check_response(o, "remove the wall helper", 204, 404) < 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"cannot remove a wall helper\" id=%s err=\"%s\"", w->helper,
               o->err);
    }
    remote_finish(o);
}

/* Records the outcome (unless one is recorded already) and removes the helper when there is
 * one. */
static void remote_end(struct sl__docker_op *o, int rc)
{
    struct sl__docker_wall *w = o->wall;

    if (w->rc == 0 && rc < 0) {
        w->rc = rc;
        memcpy(w->err, o->err, sizeof(w->err));
    }
    if (w->helper[0] == '\0'
        || sl__docker_start_requestf(o, "DELETE", NULL, 0, NULL, SL__DOCKER_BODY_MAX,
                                     on_helper_removed, "/containers/%s?force=true", w->helper)
                   < 0) {
        remote_finish(o);
    }
}

static void on_helper_logs(struct sl__docker_op *o)
{
    struct sl__docker_wall *w = o->wall;
    const char *text = o->errout.len > 0 ? sl_buf_cstr(&o->errout) : sl_buf_cstr(&o->out);

    (void)sl__docker_check_response(o, "read the wall helper's log", 200, 200);
    if (o->errout.len > 0 || o->out.len > 0) {
        sl__docker_set_err(o, SL_EIO, "docker: the inner wall was not installed: %.400s", text);
        w->rc = SL_EIO;
        memcpy(w->err, o->err, sizeof(w->err));
    }
    remote_end(o, 0);
}

static void on_helper_waited(struct sl__docker_op *o)
{
    struct sl__docker_wall *w = o->wall;
    json_t *j;
    json_t *code;

    if (sl__docker_check_response(o, "wait for the wall helper", 200, 200) < 0) {
        remote_end(o, o->rc);
        return;
    }
    j = sl__docker_response_object(o, "wait for the wall helper");
    code = json_object_get(j, "StatusCode");
    if (!json_is_integer(code)) {
        if (j != NULL) {
            sl__docker_set_err(o, SL_EIO, "docker: the wall helper's exit status is unknown");
        }
        json_decref(j);
        remote_end(o, o->rc);
        return;
    }
    if (json_integer_value(code) == 0) {
        json_decref(j);
        remote_end(o, 0);
        return;
    }
    sl__docker_set_err(o, SL_EIO, "docker: the inner wall was not installed (its helper exited %d)",
                       (int)json_integer_value(code));
    json_decref(j);
    w->rc = o->rc;
    memcpy(w->err, o->err, sizeof(w->err));
    /* Its own words say why, when it left any. */
    o->stream = true;
    o->max_out = 400;
    o->max_err = 400;
    sl_buf_truncate(&o->out, 0);
    sl_buf_truncate(&o->errout, 0);
    if (sl__docker_start_requestf(o, "GET", NULL, 0, NULL, SL__DOCKER_BODY_MAX, on_helper_logs,
                                  "/containers/%s/logs?stdout=1&stderr=1&tail=5", w->helper)
        < 0) {
        remote_end(o, 0);
    }
}

static void on_helper_started(struct sl__docker_op *o)
{
    struct sl__docker_wall *w = o->wall;

    if (sl__docker_check_response(o, "start the wall helper", 204, 304) < 0
        || sl__docker_start_requestf(o, "POST", "", 0, NULL, SL__DOCKER_BODY_MAX, on_helper_waited,
                                     "/containers/%s/wait", w->helper)
                   < 0) {
        remote_end(o, o->rc);
    }
}

static void on_helper_created(struct sl__docker_op *o)
{
    struct sl__docker_wall *w = o->wall;
    json_t *j;
    const char *id;

    sl_free(o->body);
    o->body = NULL;
    if (sl__docker_check_response(o, "create the wall helper", 201, 201) < 0) {
        remote_end(o, o->rc);
        return;
    }
    j = sl__docker_response_object(o, "create the wall helper");
    id = sl__docker_json_str(j, "Id");
    if (!sl__docker_is_name(id) || strlen(id) >= sizeof(w->helper)) {
        if (j != NULL) {
            sl__docker_set_err(o, SL_EIO, "docker: create the wall helper: no valid Id");
        }
        json_decref(j);
        remote_end(o, o->rc);
        return;
    }
    memcpy(w->helper, id, strlen(id) + 1);
    json_decref(j);
    if (sl__docker_start_requestf(o, "POST", "", 0, NULL, SL__DOCKER_BODY_MAX, on_helper_started,
                                  "/containers/%s/start", w->helper)
        < 0) {
        remote_end(o, o->rc);
    }
}

/* Appends "--tcp"/"--udp" and the ports joined by commas to `args`; none: nothing. */
static bool append_ports_arg(json_t *args, const char *flag, const uint16_t *p, size_t n)
{
    struct sl_buf b;
    bool ok = true;

    if (n == 0) {
        return true;
    }
    sl_buf_init(&b, n * 6 + 1);
    for (size_t i = 0; ok && i < n; i++) {
        ok = sl_buf_printf(&b, i == 0 ? "%u" : ",%u", (unsigned)p[i]) == 0;
    }
    ok = ok && json_array_append_new(args, json_string(flag)) == 0
         && json_array_append_new(args, json_string(sl_buf_cstr(&b))) == 0;
    sl_buf_finish(&b);
    return ok;
}

static void wall_remote(struct sl__docker_op *o, const char *cid)
{
    struct sl__docker_wall *w = o->wall;
    char mode[96];
    json_t *args = json_pack("[s,s]", "--gateway", w->gateway);
    json_t *j = NULL;
    bool ok;

    w->rc = 0;
    w->err[0] = '\0';
    w->helper[0] = '\0';
    if (o->d->wall_image == NULL) {
        json_decref(args);
        sl__docker_set_err(o, SL_EINVAL,
                           "docker: the inner wall on another host needs a wall image, and there "
                           "is none");
        remote_end(o, o->rc);
        return;
    }
    (void)snprintf(mode, sizeof(mode), "container:%s", cid);
    ok = args != NULL && append_ports_arg(args, "--tcp", w->tcp, w->n_tcp)
         && append_ports_arg(args, "--udp", w->udp, w->n_udp);
    if (ok) {
        j = json_pack("{s:s, s:[s,s], s:O, s:{s:s, s:s}, s:b, s:b, s:b, "
                      "s:{s:s, s:[s], s:[s], s:[s], s:b, s:{s:s}, s:{s:s}}}",
                      "Image", o->d->wall_image, "Entrypoint", "/sluice", "wall", "Cmd", args,
                      "Labels", "sluice.managed", "1", "sluice.wall-of", cid, "AttachStdout", 0,
                      "AttachStderr", 0, "Tty", 0, "HostConfig", "NetworkMode", mode, "CapDrop",
                      "ALL", "CapAdd", "NET_ADMIN", "SecurityOpt", "no-new-privileges:true",
                      "ReadonlyRootfs", 1, "RestartPolicy", "Name", "no", "LogConfig", "Type",
                      "json-file");
    }
    json_decref(args);
    sl_free(o->body);
    o->body = j != NULL ? sl__docker_dump_json(j, &o->body_len) : NULL;
    json_decref(j);
    if (o->body == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: cannot build the wall helper's request");
        remote_end(o, o->rc);
        return;
    }
    if (sl__docker_start_request(o, "POST", "/containers/create", o->body, o->body_len,
                                 "application/json", SL__DOCKER_BODY_MAX, on_helper_created)
        < 0) {
        remote_end(o, o->rc);
    }
}

void sl__docker_wall_start(struct sl__docker_op *o, json_t *inspected,
                           void (*done)(struct sl__docker_op *o))
{
    struct sl__docker_wall *w = o->wall;
    const char *key =
            sl__docker_json_str(json_object_get(inspected, "NetworkSettings"), "SandboxKey");
    const char *cid = sl__docker_json_str(inspected, "Id");
    int rc;

    SL_BUG_ON(w == NULL || w->queued);
    if (o->d->ca_file != NULL) {
        /* The engine is on another host. */
        w->done = done;
        if (!sl__docker_is_name(cid)) {
            sl__docker_set_err(o, SL_EIO, "docker: the container's inspect has no Id");
            done(o);
            return;
        }
        wall_remote(o, cid);
        return;
    }
    if (!sl_launcher_path_ok(key) || strcmp(key, "/") == 0) {
        sl__docker_set_err(o, SL_EIO,
                           "docker: the container has no network namespace to put the inner "
                           "wall in (is it running?)");
        done(o);
        return;
    }
    sl_free(w->netns);
    w->netns = sl_strdup(key);
    if (w->netns == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: out of memory");
        done(o);
        return;
    }
    w->done = done;
    rc = uv_queue_work(o->d->loop, &w->work, on_wall_work, on_wall_done);
    if (rc < 0) {
        sl__docker_set_err(o, SL_EIO, "docker: cannot queue the inner wall: %s", uv_strerror(rc));
        done(o);
        return;
    }
    w->queued = true;
}

/* ---- set_egress ----------------------------------------------------------------------------- */

static void on_egress_walled(struct sl__docker_op *o)
{
    sl__docker_op_finish(o);
}

static void on_egress_inspected(struct sl__docker_op *o)
{
    json_t *j;

    if (sl__docker_check_response(o, "inspect container", 200, 200) < 0) {
        sl__docker_op_finish(o);
        return;
    }
    j = sl__docker_response_object(o, "inspect container");
    if (j == NULL) {
        sl__docker_op_finish(o);
        return;
    }
    if (!json_is_true(json_object_get(json_object_get(j, "State"), "Running"))) {
        json_decref(j);
        sl__docker_set_err(o, SL_EIO, "docker: the container is not running");
        sl__docker_op_finish(o);
        return;
    }
    sl__docker_wall_start(o, j, on_egress_walled);
    json_decref(j);
}

void sl__docker_set_egress(struct sl_launcher *l, const char *id,
                           const struct sl_launcher_egress *e, sl_launcher_done_fn *cb, void *arg)
{
    struct sl__docker_op *o = sl__docker_op_on(l, id, SL__DOCKER_OP_EGRESS,
                                               (union sl__docker_op_cb){ .done = cb }, arg);

    if (o == NULL) {
        return;
    }
    if (sl__docker_wall_prepare(o, e) < 0) {
        sl__docker_fail_soon(o);
        return;
    }
    sl__docker_go(o, sl__docker_start_requestf(o, "GET", NULL, 0, NULL, SL__DOCKER_BODY_MAX,
                                               on_egress_inspected, "/containers/%s/json", id));
}

bool sl__docker_address_then_wall(struct sl__docker_op *o, const char *who,
                                  void (*done)(struct sl__docker_op *o))
{
    json_t *j;
    const char *ip;

    if (sl__docker_check_response(o, "inspect container", 200, 200) < 0) {
        return false;
    }
    j = sl__docker_response_object(o, "inspect container");
    if (j == NULL) {
        return false;
    }
    ip = sl__docker_json_str(
            json_object_get(json_object_get(json_object_get(j, "NetworkSettings"), "Networks"),
                            o->network),
            "IPAddress");
    if (!sl__docker_is_ip_text(ip, sizeof(o->ip) - 1)) {
        sl__docker_set_err(o, SL_EIO, "%s has no address on network %s", who, o->network);
        json_decref(j);
        return false;
    }
    memcpy(o->ip, ip, strlen(ip) + 1);
    if (o->wall != NULL) {
        sl__docker_wall_start(o, j, done);
    } else {
        done(o);
    }
    json_decref(j);
    return true;
}
