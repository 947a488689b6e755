/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/swarm.c - the Docker Swarm backend (swarm.h): a Docker launcher over TLS
 * (docker_int.h) whose operations on services, tasks, nodes, configs and networks go to the
 * manager, and whose operations on a sandbox's container are the Docker backend's, routed to
 * the engine of the node that runs its task (sl_docker.route).
 */
#include "control/sandbox/swarm.h"

#include <arpa/inet.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>
#include <uv.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "control/sandbox/docker.h"
#include "control/sandbox/docker_int.h"

/* How often the task list is read while the task starts (its deadline is the operation's). */
#define TASK_POLL_MS 200u
/* How long placement waits for the proxy of the node in turn: 40 x 50 ms. */
#define PLACE_POLL_MS 50u
#define PLACE_POLLS   40
/* The longest id: a service id, a container id and an IPv4 address, two dots between. */
#define ID_MAX 200u
/* The pids limit of a sandbox, as the Docker backend's. */
#define PIDS_LIMIT 1024

/* ---- ids ------------------------------------------------------------------------------------ */

/* The parts of an id SERVICE[.CONTAINER.ADDRESS]; `cid` and `addr` "" when absent. */
struct swarm_id {
    char service[ID_MAX];
    char cid[ID_MAX];
    char addr[INET_ADDRSTRLEN];
};

static bool parse_id(const char *id, struct swarm_id *out)
{
    const char *a = id != NULL ? strchr(id, '.') : NULL;
    const char *b = a != NULL ? strchr(a + 1, '.') : NULL;
    struct in_addr ia;
    size_t n;

    memset(out, 0, sizeof(*out));
    if (id == NULL || strlen(id) >= ID_MAX) {
        return false;
    }
    if (a == NULL) {
        memcpy(out->service, id, strlen(id) + 1);
        return sl__docker_is_name(out->service);
    }
    if (b == NULL || strlen(b + 1) >= sizeof(out->addr) || inet_pton(AF_INET, b + 1, &ia) != 1) {
        return false;
    }
    memcpy(out->service, id, (size_t)(a - id));
    n = (size_t)(b - a - 1);
    memcpy(out->cid, a + 1, n);
    memcpy(out->addr, b + 1, strlen(b + 1) + 1);
    return sl__docker_is_name(out->service) && sl__docker_is_name(out->cid);
}

/* ---- the container operations: the Docker backend's, on the task's node -------------------- */

/* Parses `id` and sets the route to its node; false (route unset) when it names no running
 * container, and `id` is then handed on unparsed so that the Docker operation fails it. */
static const char *route(struct sl_launcher *l, const char *id, struct swarm_id *p)
{
    struct sl_docker *d = (struct sl_docker *)l;

    if (!parse_id(id, p) || p->cid[0] == '\0') {
        /* Not a container's: an id the Docker checks refuse. */
        return "-";
    }
    d->route = p->addr;
    return p->cid;
}

static void unroute(struct sl_launcher *l)
{
    ((struct sl_docker *)l)->route = NULL;
}

static void swarm_exec(struct sl_launcher *l, const char *id, const struct sl_launcher_exec *e,
                       sl_launcher_exec_fn *cb, void *arg)
{
    struct swarm_id p;

    sl__docker_ops.exec(l, route(l, id, &p), e, cb, arg);
    unroute(l);
}

static void swarm_stat(struct sl_launcher *l, const char *id, const char *path,
                       sl_launcher_stat_fn *cb, void *arg)
{
    struct swarm_id p;

    sl__docker_ops.stat(l, route(l, id, &p), path, cb, arg);
    unroute(l);
}

static void swarm_read_file(struct sl_launcher *l, const char *id, const char *path, size_t max,
                            sl_launcher_read_fn *cb, void *arg)
{
    struct swarm_id p;

    sl__docker_ops.read_file(l, route(l, id, &p), path, max, cb, arg);
    unroute(l);
}

static void swarm_write_file(struct sl_launcher *l, const char *id, const char *path,
                             const void *data, size_t len, unsigned mode, sl_launcher_done_fn *cb,
                             void *arg)
{
    struct swarm_id p;

    sl__docker_ops.write_file(l, route(l, id, &p), path, data, len, mode, cb, arg);
    unroute(l);
}

/* The proxy of the node at `node` (an address), or NULL. */
static const char *proxy_of(const struct sl_docker *d, const char *node)
{
    for (size_t i = 0; node != NULL && i < d->n_swarm_proxies; i++) {
        if (strcmp(d->swarm_proxies[i].node, node) == 0) {
            return d->swarm_proxies[i].proxy;
        }
    }
    return NULL;
}

static void swarm_set_egress(struct sl_launcher *l, const char *id,
                             const struct sl_launcher_egress *e, sl_launcher_done_fn *cb, void *arg)
{
    struct sl_docker *d = (struct sl_docker *)l;
    struct swarm_id p;
    const char *cid = route(l, id, &p);
    struct sl_launcher_egress own;

    if (e != NULL && d->n_swarm_proxies > 0) {
        /* The only peer is the proxy of the sandbox's node; a node without one (the id names
         * no running container, say) gets an address the wall refuses. */
        own = *e;
        own.address = proxy_of(d, p.addr) != NULL ? proxy_of(d, p.addr) : "-";
        e = &own;
    }
    sl__docker_ops.set_egress(l, cid, e, cb, arg);
    unroute(l);
}

static void swarm_has_image(struct sl_launcher *l, const char *image, sl_launcher_done_fn *cb,
                            void *arg)
{
    sl__docker_ops.has_image(l, image, cb, arg);
}

static void swarm_pull_image(struct sl_launcher *l, const struct sl_launcher_pull *p,
                             sl_launcher_progress_fn *progress, sl_launcher_pulled_fn *cb,
                             void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_PULL,
                                                (union sl__docker_op_cb){ .pulled = cb }, arg);

    (void)p;
    (void)progress;
    if (o == NULL || o->rc < 0) {
        return;
    }
    sl__docker_reject(o, "swarm: pulling images is not done by this backend: load or pull the "
                         "image on every node");
}

static void swarm_close(struct sl_launcher *l, void (*closed)(void *arg), void *arg)
{
    sl__docker_ops.close(l, closed, arg);
}

/* ---- ping ----------------------------------------------------------------------------------- */

static void on_info(struct sl__docker_op *o)
{
    json_t *j;
    json_t *sw;

    if (sl__docker_check_response(o, "info", 200, 200) < 0) {
        sl__docker_op_finish(o);
        return;
    }
    j = sl__docker_response_object(o, "info");
    sw = json_object_get(j, "Swarm");
    if (j != NULL && !json_is_true(json_object_get(sw, "ControlAvailable"))) {
        const char *state = sl__docker_json_str(sw, "LocalNodeState");

        sl__docker_set_err(o, SL_EUNAVAILABLE,
                           "swarm: %s is not a swarm manager (its node state: %.32s)", o->d->origin,
                           state != NULL ? state : "unknown");
    }
    json_decref(j);
    sl__docker_op_finish(o);
}

static void swarm_ping(struct sl_launcher *l, sl_launcher_done_fn *cb, void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_PING,
                                                (union sl__docker_op_cb){ .done = cb }, arg);

    if (o == NULL || o->rc < 0) {
        return;
    }
    sl__docker_go(o, sl__docker_start_request(o, "GET", "/info", NULL, 0, NULL, SL__DOCKER_BODY_MAX,
                                              on_info));
}

/* ---- ensure_network ------------------------------------------------------------------------- */

static void on_network(struct sl__docker_op *o);

static int verify_network(struct sl__docker_op *o, const json_t *n)
{
    const char *driver = sl__docker_json_str(n, "Driver");
    const json_t *cfgs = json_object_get(json_object_get(n, "IPAM"), "Config");
    const json_t *cfg = json_array_get(cfgs, 0);
    const char *subnet = sl__docker_json_str(cfg, "Subnet");
    const char *gw = sl__docker_json_str(cfg, "Gateway");
    bool encrypted = json_object_get(json_object_get(n, "Options"), "encrypted") != NULL;

    if (driver == NULL || strcmp(driver, "overlay") != 0) {
        sl__docker_set_err(o, SL_EEXIST, "swarm: network %s exists with driver %.64s, not overlay",
                           o->name, driver != NULL ? driver : "(none)");
    } else if (!json_is_true(json_object_get(n, "Internal"))) {
        sl__docker_set_err(o, SL_EEXIST, "swarm: network %s exists but is not internal", o->name);
    } else if (!json_is_true(json_object_get(n, "Attachable"))) {
        sl__docker_set_err(o, SL_EEXIST, "swarm: network %s exists but is not attachable", o->name);
    } else if (o->d->swarm_encrypted && !encrypted) {
        sl__docker_set_err(o, SL_EEXIST,
                           "swarm: network %s exists but is not encrypted, and encryption is "
                           "asked for (the default): make it again with --opt encrypted, or "
                           "keep it as it is with --swarm-encrypted off",
                           o->name);
    } else if (json_array_size(cfgs) != 1 || subnet == NULL || strcmp(subnet, o->subnet) != 0) {
        sl__docker_set_err(o, SL_EEXIST, "swarm: network %s exists with subnet %.64s, not %s",
                           o->name, subnet != NULL ? subnet : "(none)", o->subnet);
    } else if (gw != NULL && gw[0] != '\0' && strcmp(gw, o->gateway) != 0) {
        sl__docker_set_err(o, SL_EEXIST, "swarm: network %s exists with gateway %.64s, not %s",
                           o->name, gw, o->gateway);
    }
    return o->rc;
}

static void on_network_created(struct sl__docker_op *o)
{
    if (sl__docker_check_response(o, "create network", 201, 201) < 0 && o->status == 409
        && !o->retried) {
        /* Made by someone else meanwhile: check that one. */
        o->rc = 0;
        o->retried = true;
        sl__docker_go(o, sl__docker_start_requestf(o, "GET", NULL, 0, NULL, SL__DOCKER_BODY_MAX,
                                                   on_network, "/networks/%s", o->name));
        return;
    }
    sl__docker_op_finish(o);
}

static int create_network(struct sl__docker_op *o)
{
    json_t *opts = o->d->swarm_encrypted ? json_pack("{s:s}", "encrypted", "") : json_object();
    json_t *j = json_pack("{s:s, s:b, s:s, s:b, s:b, s:b, s:{s:s, s:[{s:s, s:s}]}, s:o, s:{s:s}}",
                          "Name", o->name, "CheckDuplicate", 1, "Driver", "overlay", "Internal", 1,
                          "Attachable", 1, "EnableIPv6", 0, "IPAM", "Driver", "default", "Config",
                          "Subnet", o->subnet, "Gateway", o->gateway, "Options", opts, "Labels",
                          "sluice.managed", "1");

    sl_free(o->body);
    o->body = j != NULL ? sl__docker_dump_json(j, &o->body_len) : NULL;
    json_decref(j);
    if (o->body == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "swarm: cannot build the network request");
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
        /* The engine matched the name as an id prefix of another network. */
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

static void swarm_ensure_network(struct sl_launcher *l, const struct sl_launcher_network *net,
                                 sl_launcher_done_fn *cb, void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_NETWORK,
                                                (union sl__docker_op_cb){ .done = cb }, arg);

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (net == NULL || !sl__docker_is_name(net->name)) {
        sl__docker_reject(o, "swarm: invalid network name");
        return;
    }
    if (!sl__docker_is_ip_text(net->subnet, 64) || strchr(net->subnet, '/') == NULL
        || !sl__docker_is_ip_text(net->gateway, 64) || strchr(net->gateway, '/') != NULL) {
        sl__docker_reject(o, "swarm: invalid subnet or gateway");
        return;
    }
    o->name = sl_strdup(net->name);
    o->subnet = sl_strdup(net->subnet);
    o->gateway = sl_strdup(net->gateway);
    if (o->name == NULL || o->subnet == NULL || o->gateway == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "swarm: out of memory");
        sl__docker_fail_soon(o);
        return;
    }
    sl__docker_go(o, sl__docker_start_requestf(o, "GET", NULL, 0, NULL, SL__DOCKER_BODY_MAX,
                                               on_network, "/networks/%s", o->name));
}

/* ---- remove --------------------------------------------------------------------------------- */

static void on_service_removed(struct sl__docker_op *o)
{
    (void)sl__docker_check_response(o, "remove service", 200, 404);
    sl__docker_op_finish(o);
}

static void swarm_remove(struct sl_launcher *l, const char *id, sl_launcher_done_fn *cb, void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_REMOVE,
                                                (union sl__docker_op_cb){ .done = cb }, arg);
    struct swarm_id p;

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (!parse_id(id, &p)) {
        sl__docker_reject(o, "swarm: invalid sandbox id");
        return;
    }
    sl__docker_go(o, sl__docker_start_requestf(o, "DELETE", NULL, 0, NULL, SL__DOCKER_BODY_MAX,
                                               on_service_removed, "/services/%s", p.service));
}

/* ---- create_and_start ----------------------------------------------------------------------- */

static void on_cleaned_up(struct sl__docker_op *o)
{
    /* Whatever the DELETE said, the first error is the one to report. */
    o->rc = o->saved_rc;
    memcpy(o->err, o->saved_err, sizeof(o->err));
    sl__docker_op_finish(o);
}

/* A step after the service was made failed: remove it, then report the error. */
static void create_failed(struct sl__docker_op *o)
{
    o->saved_rc = o->rc;
    memcpy(o->saved_err, o->err, sizeof(o->err));
    if (o->service == NULL) {
        sl__docker_op_finish(o);
        return;
    }
    sl_free(o->host);
    o->host = NULL;
    o->deadline_ms = uv_now(o->d->loop) + SL__DOCKER_DEADLINE_MS;
    if (sl__docker_start_requestf(o, "DELETE", NULL, 0, NULL, SL__DOCKER_BODY_MAX, on_cleaned_up,
                                  "/services/%s", o->service)
        < 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"cannot remove a failed service\" id=%s", o->service);
        on_cleaned_up(o);
    }
}

static void on_walled(struct sl__docker_op *o)
{
    char id[ID_MAX];
    int n;

    if (o->rc < 0) {
        create_failed(o);
        return;
    }
    n = snprintf(id, sizeof(id), "%s.%s.%s", o->service, o->cid, o->host);
    sl_free(o->id);
    o->id = n > 0 && (size_t)n < sizeof(id) ? sl_strdup(id) : NULL;
    if (o->id == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "swarm: out of memory");
        create_failed(o);
        return;
    }
    sl__docker_op_finish(o);
}

static void on_container_inspected(struct sl__docker_op *o)
{
    if (!sl__docker_address_then_wall(o, "swarm: the task's container", on_walled)) {
        create_failed(o);
    }
}

static void inspect_container(struct sl__docker_op *o)
{
    if (sl__docker_start_requestf(o, "GET", NULL, 0, NULL, SL__DOCKER_BODY_MAX,
                                  on_container_inspected, "/containers/%s/json", o->cid)
        < 0) {
        create_failed(o);
    }
}

static void on_copied(struct sl__docker_op *o)
{
    if (sl__docker_check_response(o, "copy files", 200, 200) < 0) {
        create_failed(o);
        return;
    }
    inspect_container(o);
}

static void on_node(struct sl__docker_op *o)
{
    json_t *j;
    const char *addr;
    struct in_addr ia;

    if (sl__docker_check_response(o, "inspect node", 200, 200) < 0) {
        create_failed(o);
        return;
    }
    j = sl__docker_response_object(o, "inspect node");
    addr = sl__docker_json_str(json_object_get(j, "Status"), "Addr");
    if (j == NULL || addr == NULL || inet_pton(AF_INET, addr, &ia) != 1) {
        if (j != NULL) {
            sl__docker_set_err(o, SL_EIO, "swarm: the task's node has no IPv4 address");
        }
        json_decref(j);
        create_failed(o);
        return;
    }
    /* From here on the calls go to the node's engine. */
    o->host = sl_strdup(addr);
    json_decref(j);
    if (o->host == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "swarm: out of memory");
        create_failed(o);
        return;
    }
    if (o->tar == NULL) {
        inspect_container(o);
        return;
    }
    if (sl__docker_start_requestf(o, "PUT", o->tar, o->tar_len, "application/x-tar",
                                  SL__DOCKER_BODY_MAX, on_copied,
                                  "/containers/%s/archive?path=%%2F", o->cid)
        < 0) {
        create_failed(o);
    }
}

static int read_tasks(struct sl__docker_op *o);

static void on_task_poll(uv_timer_t *t)
{
    struct sl__docker_op *o = SL_CONTAINER_OF(t, struct sl__docker_op, timer);

    if (uv_now(o->d->loop) >= o->deadline_ms) {
        sl__docker_set_err(o, SL_EUNAVAILABLE, "swarm: the task of service %s did not run in time",
                           o->service);
        create_failed(o);
        return;
    }
    if (read_tasks(o) < 0) {
        create_failed(o);
    }
}

/* The task's state: 1 it runs (o->cid and o->name = its node id set), 0 not yet, < 0 failed
 * (o->err set). */
static int task_state(struct sl__docker_op *o, const json_t *tasks)
{
    const json_t *t;
    size_t i;

    json_array_foreach(tasks, i, t)
    {
        const json_t *st = json_object_get(t, "Status");
        const char *state = sl__docker_json_str(st, "State");
        const char *cid =
                sl__docker_json_str(json_object_get(st, "ContainerStatus"), "ContainerID");
        const char *node = sl__docker_json_str(t, "NodeID");

        if (state == NULL) {
            continue;
        }
        if (strcmp(state, "running") == 0) {
            if (!sl__docker_is_name(cid) || !sl__docker_is_name(node)) {
                sl__docker_set_err(o, SL_EIO, "swarm: the running task has no container or node");
                return o->rc;
            }
            sl_free(o->cid);
            sl_free(o->name);
            o->cid = sl_strdup(cid);
            o->name = sl_strdup(node);
            if (o->cid == NULL || o->name == NULL) {
                sl__docker_set_err(o, SL_ENOMEM, "swarm: out of memory");
                return o->rc;
            }
            return 1;
        }
        if (strcmp(state, "failed") == 0 || strcmp(state, "rejected") == 0
            || strcmp(state, "complete") == 0 || strcmp(state, "shutdown") == 0
            || strcmp(state, "orphaned") == 0 || strcmp(state, "remove") == 0) {
            const char *why = sl__docker_json_str(st, "Err");

            sl__docker_set_err(o, SL_EIO, "swarm: the task %.16s: %.300s", state,
                               why != NULL ? why : sl__docker_json_str(st, "Message"));
            return o->rc;
        }
    }
    return 0;
}

static void on_tasks(struct sl__docker_op *o)
{
    json_t *j;
    int st;

    if (sl__docker_check_response(o, "list tasks", 200, 200) < 0) {
        create_failed(o);
        return;
    }
    j = json_loadb((const char *)o->resp.p, o->resp.len, 0, NULL);
    if (!json_is_array(j)) {
        json_decref(j);
        sl__docker_set_err(o, SL_EIO, "swarm: list tasks: the answer is not a JSON array");
        create_failed(o);
        return;
    }
    st = task_state(o, j);
    json_decref(j);
    if (st < 0) {
        create_failed(o);
        return;
    }
    if (st == 0) {
        o->task_polls++;
        (void)uv_timer_start(&o->timer, on_task_poll, TASK_POLL_MS, 0);
        return;
    }
    if (sl__docker_start_requestf(o, "GET", NULL, 0, NULL, SL__DOCKER_BODY_MAX, on_node,
                                  "/nodes/%s", o->name)
        < 0) {
        create_failed(o);
    }
}

static int read_tasks(struct sl__docker_op *o)
{
    json_t *f = json_pack("{s:[s]}", "service", o->service);
    struct sl_buf path;
    char *text;
    size_t n = 0;
    int rc;

    text = f != NULL ? sl__docker_dump_json(f, &n) : NULL;
    json_decref(f);
    if (text == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "swarm: out of memory");
        return o->rc;
    }
    sl_buf_init(&path, SL__DOCKER_URL_MAX);
    rc = sl_buf_append_str(&path, "/tasks?filters=");
    rc = rc < 0 ? rc : sl__docker_append_escaped(&path, text);
    sl_free(text);
    if (rc < 0) {
        sl__docker_set_err(o, rc, "swarm: cannot build the request: %s", sl_strerror(rc));
    } else {
        rc = sl__docker_start_request(o, "GET", sl_buf_cstr(&path), NULL, 0, NULL,
                                      SL__DOCKER_BODY_MAX, on_tasks);
    }
    sl_buf_finish(&path);
    return rc;
}

static void on_service_created(struct sl__docker_op *o)
{
    json_t *j;
    const char *id;

    if (sl__docker_check_response(o, "create service", 201, 201) < 0) {
        sl__docker_op_finish(o);
        return;
    }
    j = sl__docker_response_object(o, "create service");
    id = sl__docker_json_str(j, "ID");
    o->service = sl__docker_is_name(id) ? sl_strdup(id) : NULL;
    json_decref(j);
    if (o->service == NULL) {
        /* Nothing to remove by id; a list by label finds it. */
        sl__docker_set_err(o, SL_EIO, "swarm: create service: no valid ID in the answer");
        sl__docker_op_finish(o);
        return;
    }
    if (read_tasks(o) < 0) {
        create_failed(o);
    }
}

static int start_service_create(struct sl__docker_op *o)
{
    return sl__docker_start_request(o, "POST", "/services/create", o->body, o->body_len,
                                    "application/json", SL__DOCKER_BODY_MAX, on_service_created);
}

/* The configs' IDs are known (or there are none): put them into the service's body and make the
 * service. */
static void create_service(struct sl__docker_op *o)
{
    json_t *j = json_loadb(o->body, o->body_len, 0, NULL);
    json_t *cs = json_object_get(json_object_get(j, "TaskTemplate"), "ContainerSpec");
    json_t *cfgs = json_object_get(cs, "Configs");
    bool ok = json_array_size(cfgs) == o->n_configs;

    /* The body lists the configs in the order they were prepared. */
    for (size_t i = 0; ok && i < o->n_configs; i++) {
        ok = json_object_set_new(json_array_get(cfgs, i), "ConfigID", json_string(o->configs[i].id))
             == 0;
    }
    if (!ok) {
        json_decref(j);
        sl__docker_set_err(o, SL_ENOMEM, "swarm: cannot build the service request");
        sl__docker_op_finish(o);
        return;
    }
    sl_free(o->body);
    o->body = sl__docker_dump_json(j, &o->body_len);
    json_decref(j);
    if (o->body == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "swarm: cannot build the service request");
        sl__docker_op_finish(o);
        return;
    }
    sl__docker_go(o, start_service_create(o));
}

static void create_config_then_service(struct sl__docker_op *o);

static void on_config_read(struct sl__docker_op *o)
{
    struct sl__docker_config *c = &o->configs[o->config_at];
    json_t *j;
    const char *id;
    const char *data;

    if (sl__docker_check_response(o, "inspect config", 200, 200) < 0) {
        sl__docker_op_finish(o);
        return;
    }
    j = sl__docker_response_object(o, "inspect config");
    id = sl__docker_json_str(j, "ID");
    data = sl__docker_json_str(json_object_get(j, "Spec"), "Data");
    if (j != NULL && (data == NULL || strcmp(data, c->data) != 0)) {
        /* Named after our bytes' hash, holding others: not ours to run. */
        sl__docker_set_err(o, SL_EEXIST, "swarm: config %s exists with other contents", c->name);
    } else if (j != NULL && !sl__docker_is_name(id)) {
        sl__docker_set_err(o, SL_EIO, "swarm: config %s has no valid ID", c->name);
    } else if (j != NULL) {
        c->id = sl_strdup(id);
        if (c->id == NULL) {
            sl__docker_set_err(o, SL_ENOMEM, "swarm: out of memory");
        }
    }
    json_decref(j);
    if (o->rc < 0) {
        sl__docker_op_finish(o);
        return;
    }
    o->config_at++;
    create_config_then_service(o);
}

static void on_config_created(struct sl__docker_op *o)
{
    struct sl__docker_config *c = &o->configs[o->config_at];
    json_t *j;
    const char *id;

    if (sl__docker_check_response(o, "create config", 201, 201) < 0) {
        if (o->status != 409) {
            sl__docker_op_finish(o);
            return;
        }
        /* There already: the same bytes, made for an earlier sandbox (checked). */
        o->rc = 0;
        o->err[0] = '\0';
        sl__docker_go(o, sl__docker_start_requestf(o, "GET", NULL, 0, NULL, SL__DOCKER_BODY_MAX,
                                                   on_config_read, "/configs/%s", c->name));
        return;
    }
    j = sl__docker_response_object(o, "create config");
    id = sl__docker_json_str(j, "ID");
    c->id = sl__docker_is_name(id) ? sl_strdup(id) : NULL;
    json_decref(j);
    if (c->id == NULL) {
        sl__docker_set_err(o, SL_EIO, "swarm: create config: no valid ID in the answer");
        sl__docker_op_finish(o);
        return;
    }
    o->config_at++;
    create_config_then_service(o);
}

/* Adds the config of `f` to o->configs: named after its bytes and mode ("sluice-file-HEX", so
 * that every sandbox shares one config per content), its bytes in base64 and its create
 * request. Returns the config's name (owned by the op), or NULL when out of memory. */
static const char *prepare_config(struct sl__docker_op *o, const struct sl_launcher_file *f)
{
    struct sl__docker_config *c;
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_state st;
    char hex[2 * 12 + 1];
    char name[64];
    unsigned char mode[4] = { (unsigned char)(f->mode >> 24), (unsigned char)(f->mode >> 16),
                              (unsigned char)(f->mode >> 8), (unsigned char)f->mode };
    size_t b64 = sodium_base64_encoded_len(f->len, sodium_base64_VARIANT_ORIGINAL);
    json_t *j;

    if (o->n_configs == SL__DOCKER_CONFIGS_MAX) {
        return NULL;
    }
    c = &o->configs[o->n_configs++];
    (void)crypto_hash_sha256_init(&st);
    (void)crypto_hash_sha256_update(&st, mode, sizeof(mode));
    (void)crypto_hash_sha256_update(&st, f->data != NULL ? f->data : (const void *)"", f->len);
    (void)crypto_hash_sha256_final(&st, h);
    (void)sodium_bin2hex(hex, sizeof(hex), h, 12);
    (void)snprintf(name, sizeof(name), "sluice-file-%s", hex);
    c->name = sl_strdup(name);
    c->data = sl_malloc(b64);
    if (c->name == NULL || c->data == NULL) {
        return NULL;
    }
    (void)sodium_bin2base64(c->data, b64, f->data != NULL ? f->data : (const void *)"", f->len,
                            sodium_base64_VARIANT_ORIGINAL);
    j = json_pack("{s:s, s:{s:s}, s:s}", "Name", c->name, "Labels", "sluice.managed", "1", "Data",
                  c->data);
    c->req = j != NULL ? sl__docker_dump_json(j, &c->req_len) : NULL;
    json_decref(j);
    return c->req != NULL ? c->name : NULL;
}

/* Appends to the service's ContainerSpec `cs` the mount of config `name` as file `f` (its path
 * and mode; owned by root). False when out of memory. */
static bool mount_config(json_t *cs, const struct sl_launcher_file *f, const char *name)
{
    return json_array_append_new(json_object_get(cs, "Configs"),
                                 json_pack("{s:{s:s, s:s, s:s, s:i}, s:s}", "File", "Name", f->path,
                                           "UID", "0", "GID", "0", "Mode", (int)f->mode,
                                           "ConfigName", name))
           == 0;
}

/* The service's body (a new reference) without the configs' IDs, or NULL with o->err set. */
static json_t *service_body(struct sl__docker_op *o, const struct sl_launcher_container *spec,
                            const struct sl_launcher_file *run)
{
    json_t *env = json_array();
    json_t *labels = json_object();
    json_t *cmd = json_array();
    json_t *limits = json_pack("{s:i}", "Pids", PIDS_LIMIT);
    json_t *cs = NULL;
    json_t *j = NULL;
    bool ok = env != NULL && labels != NULL && cmd != NULL && limits != NULL;

    for (size_t i = 0; ok && i < spec->n_env; i++) {
        ok = json_array_append_new(env, json_string(spec->env[i])) == 0;
    }
    for (size_t i = 0; ok && i < spec->n_labels; i++) {
        ok = json_object_set_new(labels, spec->labels[i].key, json_string(spec->labels[i].value))
             == 0;
    }
    if (spec->n_cmd == 0) {
        ok = ok && json_array_append_new(cmd, json_string("sleep")) == 0
             && json_array_append_new(cmd, json_string("infinity")) == 0;
    }
    for (size_t i = 0; ok && i < spec->n_cmd; i++) {
        ok = json_array_append_new(cmd, json_string(spec->cmd[i])) == 0;
    }
    if (ok && spec->cpus_centi > 0) {
        ok = json_object_set_new(limits, "NanoCPUs", json_integer(spec->cpus_centi * 10000000))
             == 0;
    }
    if (ok && spec->memory_bytes > 0) {
        ok = json_object_set_new(limits, "MemoryBytes", json_integer(spec->memory_bytes)) == 0;
    }
    if (ok) {
        /* Command replaces the image's entrypoint, and without Args its command too; no
         * HEALTHCHECK of the image runs (the engine would exec it in the task on its own). */
        cs = json_pack("{s:s, s:O, s:O, s:O, s:s, s:s, s:b, s:[s,s], s:[], s:{s:[s]}}", "Image",
                       spec->image, "Command", cmd, "Env", env, "Labels", labels, "Hostname",
                       "sandbox", "Dir", "/workspace/repo", "Init", 1, "CapabilityDrop", "NET_RAW",
                       "NET_ADMIN", "Configs", "HealthCheck", "Test", "NONE");
        ok = cs != NULL;
    }
    if (ok && run != NULL) {
        ok = mount_config(cs, run, o->configs[0].name);
    }
    if (ok) {
        j = json_pack("{s:s, s:O, s:{s:O, s:{s:O}, s:{s:s}, s:[{s:s}], s:{s:s, s:{s:s}}}, "
                      "s:{s:{s:i}}, s:{s:s}}",
                      "Name", spec->name, "Labels", labels, "TaskTemplate", "ContainerSpec", cs,
                      "Resources", "Limits", limits, "RestartPolicy", "Condition", "none",
                      "Networks", "Target", spec->network, "LogDriver", "Name", "json-file",
                      "Options", "max-size", "1m", "Mode", "Replicated", "Replicas", 1,
                      "EndpointSpec", "Mode", "dnsrr");
    }
    if (j == NULL) {
        sl__docker_set_err(o, SL_EINVAL,
                           "swarm: cannot build the service request (invalid text in the "
                           "environment, labels or command?)");
    }
    json_decref(env);
    json_decref(labels);
    json_decref(cmd);
    json_decref(limits);
    json_decref(cs);
    return j;
}

static json_t *answer_array(struct sl__docker_op *o, const char *what);

/* Proceeds with the service's body in o->body: its configs first, one at a time, when it has
 * any (o->config_at is the next). */
static void create_config_then_service(struct sl__docker_op *o)
{
    const struct sl__docker_config *c;

    if (o->config_at == o->n_configs) {
        create_service(o);
        return;
    }
    c = &o->configs[o->config_at];
    sl__docker_go(o, sl__docker_start_request(o, "POST", "/configs/create", c->req, c->req_len,
                                              "application/json", SL__DOCKER_BODY_MAX,
                                              on_config_created));
}

/* Adds to the service in `cs` (its ContainerSpec) the resolv.conf naming `proxy` as its only
 * name server (docs/reference/containers.md §5.4, DNS): a config mounted read-only over
 * /etc/resolv.conf, over the file Docker writes there (which names its embedded DNS, closed by
 * the inner wall). */
static bool add_resolv_conf(struct sl__docker_op *o, json_t *cs, const char *proxy)
{
    char text[INET_ADDRSTRLEN + 128];
    int n = snprintf(text, sizeof(text),
                     "# sluice: names resolve to this node's proxy, which answers\n"
                     "nameserver %s\noptions timeout:1 attempts:2\n",
                     proxy);
    const struct sl_launcher_file f = { "/etc/resolv.conf", text, (size_t)n, 0644 };
    const char *name;

    if (n < 0 || (size_t)n >= sizeof(text)) {
        return false;
    }
    name = prepare_config(o, &f);
    return name != NULL && mount_config(cs, &f, name);
}

/* Pins the service in o->body to node `id`, names its proxy `proxy` in the container's hosts
 * file as o->path (the spec's proxy_name; NULL: none), and as its name server when the spec
 * asked for that (o->proxy_dns). */
static int pin_service(struct sl__docker_op *o, const char *id, const char *proxy)
{
    json_t *j = json_loadb(o->body, o->body_len, 0, NULL);
    json_t *tt = json_object_get(j, "TaskTemplate");
    json_t *cs = json_object_get(tt, "ContainerSpec");
    char constraint[ID_MAX + 16];
    char host[INET_ADDRSTRLEN + 256];
    bool ok = cs != NULL;

    (void)snprintf(constraint, sizeof(constraint), "node.id==%s", id);
    ok = ok
         && json_object_set_new(tt, "Placement", json_pack("{s:[s]}", "Constraints", constraint))
                    == 0;
    if (ok && o->path != NULL) {
        (void)snprintf(host, sizeof(host), "%s %s", proxy, o->path);
        ok = json_object_set_new(cs, "Hosts", json_pack("[s]", host)) == 0;
    }
    if (ok && o->proxy_dns) {
        ok = add_resolv_conf(o, cs, proxy);
    }
    if (ok) {
        sl_free(o->body);
        o->body = sl__docker_dump_json(j, &o->body_len);
        ok = o->body != NULL;
    }
    json_decref(j);
    if (!ok) {
        sl__docker_set_err(o, SL_ENOMEM, "swarm: cannot build the service request");
        return o->rc;
    }
    return 0;
}

static void on_placement_nodes(struct sl__docker_op *o);

/* The node in turn's proxy did not hold the sandbox's entry yet: ask for the nodes again. */
static void on_placement_retry(uv_timer_t *t)
{
    struct sl__docker_op *o = SL_CONTAINER_OF(t, struct sl__docker_op, timer);

    sl__docker_go(o, sl__docker_start_request(o, "GET", "/nodes", NULL, 0, NULL,
                                              SL__DOCKER_BODY_MAX, on_placement_nodes));
}

/*
 * GET /nodes answered: the next Ready, active node, in turn, among those whose proxy is
 * reachable, once that proxy holds the sandbox's entry (o->snapshot_version). The manager's wait
 * ends when the first proxy acknowledged; the others follow within milliseconds, so the node in
 * turn is waited for (PLACE_POLL_MS at a time, PLACE_POLLS times) rather than skipped, which would
 * put every sandbox on the fastest proxy's node. One that still lags then, or whose proxy went
 * unreachable, is passed over for the next in turn that holds the entry: a dead proxy stalls
 * nothing but its own node.
 */
static void on_placement_nodes(struct sl__docker_op *o)
{
    json_t *nodes = answer_array(o, "list nodes");
    struct sl_docker *d = o->d;
    const char *ids[SL_SWARM_PROXIES_MAX];
    const char *proxies[SL_SWARM_PROXIES_MAX];
    bool holds[SL_SWARM_PROXIES_MAX];
    size_t n = 0;
    size_t pick = SIZE_MAX;
    json_t *nd;
    size_t i;

    /* In the order of the configuration, so that the turn means the same at every call. */
    for (size_t k = 0; nodes != NULL && k < d->n_swarm_proxies; k++) {
        json_array_foreach(nodes, i, nd)
        {
            const json_t *st = json_object_get(nd, "Status");
            const char *id = sl__docker_json_str(nd, "ID");
            const char *state = sl__docker_json_str(st, "State");
            const char *avail = sl__docker_json_str(json_object_get(nd, "Spec"), "Availability");
            const char *addr = sl__docker_json_str(st, "Addr");
            int64_t acked = INT64_MAX;

            if (!sl__docker_is_name(id) || state == NULL || strcmp(state, "ready") != 0
                || avail == NULL || strcmp(avail, "active") != 0 || addr == NULL
                || strcmp(addr, d->swarm_proxies[k].node) != 0 || n >= SL_SWARM_PROXIES_MAX) {
                continue;
            }
            if (d->swarm_proxy_acked != NULL && o->snapshot_version > 0) {
                acked = d->swarm_proxy_acked(d->swarm_proxy_acked_arg, addr);
            }
            if (acked < 0) {
                sl_log(SL_LOG_DEBUG, 0,
                       "msg=\"swarm: a node's proxy is unreachable; skipped\" node=%s proxy=%s",
                       addr, d->swarm_proxies[k].proxy);
                break;
            }
            ids[n] = id;
            proxies[n] = d->swarm_proxies[k].proxy;
            /* A proxy that does not hold the entry would refuse the sandbox (407). */
            holds[n] = acked >= o->snapshot_version;
            n++;
            break;
        }
    }
    if (n > 0 && holds[d->swarm_turn % n]) {
        pick = d->swarm_turn % n;
    } else if (n > 0 && o->place_polls < PLACE_POLLS && uv_now(d->loop) < o->deadline_ms) {
        o->place_polls++;
        json_decref(nodes);
        (void)uv_timer_start(&o->timer, on_placement_retry, PLACE_POLL_MS, 0);
        return;
    }
    for (size_t k = 0; pick == SIZE_MAX && k < n; k++) {
        if (holds[(d->swarm_turn + k) % n]) {
            pick = (d->swarm_turn + k) % n;
        }
    }
    if (nodes != NULL && pick == SIZE_MAX && n > 0) {
        sl__docker_set_err(o, SL_EUNAVAILABLE,
                           "swarm: no Ready, active node whose proxy acknowledged snapshot %lld "
                           "(the sandbox's entry) to place the sandbox on",
                           (long long)o->snapshot_version);
    } else if (nodes != NULL && pick == SIZE_MAX) {
        sl__docker_set_err(o, SL_EUNAVAILABLE,
                           "swarm: no Ready, active node with a reachable proxy to place the "
                           "sandbox on");
    }
    if (o->rc == 0) {
        d->swarm_turn = pick + 1;
        sl_log(SL_LOG_DEBUG, 0, "msg=\"swarm: placing a sandbox\" node=%s proxy=%s waited_ms=%u",
               ids[pick], proxies[pick], (unsigned)o->place_polls * PLACE_POLL_MS);
        if (pin_service(o, ids[pick], proxies[pick]) == 0 && o->wall != NULL
            && sl__docker_wall_set_address(o, proxies[pick]) < 0) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"swarm: a proxy's address is not IPv4\" proxy=%s",
                   proxies[pick]);
        }
    }
    json_decref(nodes);
    if (o->rc < 0) {
        sl__docker_op_finish(o);
        return;
    }
    create_config_then_service(o);
}

static void swarm_create_and_start(struct sl_launcher *l, const struct sl_launcher_container *spec,
                                   sl_launcher_started_fn *cb, void *arg)
{
    struct sl_docker *d = (struct sl_docker *)l;
    struct sl__docker_op *o = sl__docker_op_new(d, SL__DOCKER_OP_CREATE,
                                                (union sl__docker_op_cb){ .started = cb }, arg);
    const struct sl_launcher_file *run = NULL;
    json_t *j;
    int rc;

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (spec == NULL) {
        sl__docker_reject(o, "swarm: no container spec");
        return;
    }
    if (!sl__docker_create_spec_ok(o, spec)) {
        return;
    }
    for (size_t i = 0; spec->n_cmd > 0 && i < spec->n_files; i++) {
        if (strcmp(spec->files[i].path, spec->cmd[0]) == 0) {
            run = &spec->files[i];
        }
    }
    if (spec->n_cmd > 0 && run == NULL) {
        /* Swarm starts the task itself, before any file can be copied in: the command must
         * come with it. */
        sl__docker_reject(o, "swarm: cmd[0] must be one of the spec's files");
        return;
    }
    if (spec->egress != NULL && d->wall_image == NULL) {
        sl__docker_reject(o, "swarm: an inner wall needs the wall image, and there is none");
        return;
    }
    if (spec->egress != NULL && sl__docker_wall_prepare(o, spec->egress) < 0) {
        sl__docker_fail_soon(o);
        return;
    }
    if (run != NULL && prepare_config(o, run) == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "swarm: cannot prepare the container: %s",
                           sl_strerror(SL_ENOMEM));
        sl__docker_fail_soon(o);
        return;
    }
    o->proxy_dns = spec->proxy_dns;
    j = service_body(o, spec, run);
    if (j == NULL) {
        sl__docker_fail_soon(o);
        return;
    }
    o->body = sl__docker_dump_json(j, &o->body_len);
    json_decref(j);
    o->network = sl_strdup(spec->network);
    rc = o->body == NULL || o->network == NULL
                 ? SL_ENOMEM
                 : sl__docker_create_tar(o, spec, run != NULL ? run->path : NULL);
    if (rc < 0) {
        sl__docker_set_err(o, rc, "swarm: cannot prepare the container: %s", sl_strerror(rc));
        sl__docker_fail_soon(o);
        return;
    }
    if (d->n_swarm_proxies > 0) {
        /* The sandbox goes where a proxy holds its entry: the node is chosen first. */
        o->snapshot_version = spec->snapshot_version;
        if (spec->proxy_name != NULL) {
            o->path = sl_strdup(spec->proxy_name);
            if (o->path == NULL) {
                sl__docker_set_err(o, SL_ENOMEM, "swarm: out of memory");
                sl__docker_fail_soon(o);
                return;
            }
        }
        sl__docker_go(o, sl__docker_start_request(o, "GET", "/nodes", NULL, 0, NULL,
                                                  SL__DOCKER_BODY_MAX, on_placement_nodes));
        return;
    }
    create_config_then_service(o);
}

/* ---- list ----------------------------------------------------------------------------------- */

/* o->ids holds the services, o->found the running tasks (by service id: the task), then the
 * nodes are read and the entries made. */

static int get_filtered(struct sl__docker_op *o, const char *what, json_t *filters,
                        void (*done)(struct sl__docker_op *o))
{
    struct sl_buf path;
    char *text = filters != NULL ? sl__docker_dump_json(filters, &(size_t){ 0 }) : NULL;
    int rc;

    json_decref(filters);
    if (text == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "swarm: out of memory");
        return o->rc;
    }
    sl_buf_init(&path, SL__DOCKER_URL_MAX);
    rc = sl_buf_printf(&path, "/%s?filters=", what);
    rc = rc < 0 ? rc : sl__docker_append_escaped(&path, text);
    sl_free(text);
    if (rc < 0) {
        sl__docker_set_err(o, rc, "swarm: cannot build the request: %s", sl_strerror(rc));
    } else {
        rc = sl__docker_start_request(o, "GET", sl_buf_cstr(&path), NULL, 0, NULL,
                                      SL__DOCKER_BODY_MAX, done);
    }
    sl_buf_finish(&path);
    return rc;
}

static json_t *answer_array(struct sl__docker_op *o, const char *what)
{
    json_t *j;

    if (sl__docker_check_response(o, what, 200, 200) < 0) {
        return NULL;
    }
    j = json_loadb((const char *)o->resp.p, o->resp.len, 0, NULL);
    if (!json_is_array(j)) {
        json_decref(j);
        sl__docker_set_err(o, SL_EIO, "swarm: %s: the answer is not a JSON array", what);
        return NULL;
    }
    return j;
}

/* The address (without its prefix length) of task `t` on its first network, or "". */
static void task_ip(const json_t *t, char *out, size_t cap)
{
    const char *a = json_string_value(json_array_get(
            json_object_get(json_array_get(json_object_get(t, "NetworksAttachments"), 0),
                            "Addresses"),
            0));
    size_t n = a != NULL ? strcspn(a, "/") : 0;

    out[0] = '\0';
    if (n > 0 && n < cap && sl__docker_is_ip_text(a, 64)) {
        memcpy(out, a, n);
        out[n] = '\0';
    }
}

static void on_list_nodes(struct sl__docker_op *o)
{
    json_t *nodes = answer_array(o, "list nodes");
    json_t *addrs = json_object();
    json_t *s;
    json_t *n;
    size_t i;

    json_array_foreach(nodes, i, n)
    {
        const json_t *st = json_object_get(n, "Status");
        const char *id = sl__docker_json_str(n, "ID");
        const char *state = sl__docker_json_str(st, "State");
        const char *addr = sl__docker_json_str(st, "Addr");
        struct in_addr ia;

        /* A node that is not Ready runs nothing we can reach: its tasks are gone. */
        if (id != NULL && state != NULL && strcmp(state, "ready") == 0 && addr != NULL
            && inet_pton(AF_INET, addr, &ia) == 1 && addrs != NULL) {
            (void)json_object_set_new(addrs, id, json_string(addr));
        }
    }
    json_decref(nodes);
    if (o->rc < 0 || addrs == NULL) {
        json_decref(addrs);
        if (o->rc == 0) {
            sl__docker_set_err(o, SL_ENOMEM, "swarm: out of memory");
        }
        sl__docker_op_finish(o);
        return;
    }
    {
        json_t *tasks = o->found;
        json_t *found = json_array();

        o->found = found;
        json_array_foreach(o->ids, i, s)
        {
            const json_t *spec = json_object_get(s, "Spec");
            const char *sid = sl__docker_json_str(s, "ID");
            const json_t *t = json_object_get(tasks, sid != NULL ? sid : "");
            const char *node = sl__docker_json_str(t, "NodeID");
            const char *addr = node != NULL ? sl__docker_json_str(addrs, node) : NULL;
            const char *cid = sl__docker_json_str(
                    json_object_get(json_object_get(t, "Status"), "ContainerStatus"),
                    "ContainerID");
            json_t *labels = json_object_get(spec, "Labels");
            json_t *env = json_object_get(
                    json_object_get(json_object_get(spec, "TaskTemplate"), "ContainerSpec"), "Env");
            bool running = addr != NULL && sl__docker_is_name(cid);
            char id[ID_MAX];
            char ip[64];
            json_t *e;

            if (!sl__docker_is_name(sid) || found == NULL) {
                continue;
            }
            if (running) {
                (void)snprintf(id, sizeof(id), "%s.%s.%s", sid, cid, addr);
                task_ip(t, ip, sizeof(ip));
            } else {
                (void)snprintf(id, sizeof(id), "%s", sid);
                ip[0] = '\0';
            }
            labels = json_is_object(labels) ? json_incref(labels) : json_object();
            env = json_is_array(env) ? json_incref(env) : json_array();
            e = json_pack("{s:s, s:s, s:b, s:s, s:o, s:o}", "id", id, "name",
                          sl__docker_json_str(spec, "Name") != NULL
                                  ? sl__docker_json_str(spec, "Name")
                                  : "",
                          "running", running, "ip", ip, "labels", labels, "env", env);
            if (e == NULL || json_array_append_new(found, e) != 0) {
                sl__docker_set_err(o, SL_ENOMEM, "swarm: out of memory");
                break;
            }
        }
        if (found == NULL && o->rc == 0) {
            sl__docker_set_err(o, SL_ENOMEM, "swarm: out of memory");
        }
        json_decref(tasks);
    }
    json_decref(addrs);
    sl__docker_op_finish(o);
}

static void on_list_tasks(struct sl__docker_op *o)
{
    json_t *tasks = answer_array(o, "list tasks");
    json_t *t;
    size_t i;

    json_decref(o->found);
    o->found = json_object();
    if (tasks == NULL || o->found == NULL) {
        json_decref(tasks);
        sl__docker_op_finish(o);
        return;
    }
    json_array_foreach(tasks, i, t)
    {
        const char *sid = sl__docker_json_str(t, "ServiceID");
        const char *state = sl__docker_json_str(json_object_get(t, "Status"), "State");

        if (sid != NULL && state != NULL && strcmp(state, "running") == 0) {
            (void)json_object_set(o->found, sid, t);
        }
    }
    json_decref(tasks);
    if (sl__docker_start_request(o, "GET", "/nodes", NULL, 0, NULL, SL__DOCKER_BODY_MAX,
                                 on_list_nodes)
        < 0) {
        sl__docker_op_finish(o);
    }
}

static void on_list_services(struct sl__docker_op *o)
{
    o->ids = answer_array(o, "list services");
    if (o->ids == NULL
        || get_filtered(o, "tasks", json_pack("{s:[s]}", "desired-state", "running"), on_list_tasks)
                   < 0) {
        sl__docker_op_finish(o);
    }
}

/* Delivered by the Docker backend's list (sl__docker_deliver_list: o->found, the entries, read
 * only when the list succeeded). */
static void swarm_list(struct sl_launcher *l, const char *label_key, sl_launcher_list_fn *cb,
                       void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_LIST,
                                                (union sl__docker_op_cb){ .list = cb }, arg);

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (label_key == NULL || label_key[0] == '\0' || strlen(label_key) > 1024) {
        sl__docker_reject(o, "swarm: a label key must be 1-1024 characters");
        return;
    }
    sl__docker_go(o, get_filtered(o, "services", json_pack("{s:[s]}", "label", label_key),
                                  on_list_services));
}

/* ---- the launcher --------------------------------------------------------------------------- */

static const struct sl_launcher_ops swarm_ops = {
    .ping = swarm_ping,
    .ensure_network = swarm_ensure_network,
    .has_image = swarm_has_image,
    .pull_image = swarm_pull_image,
    .create_and_start = swarm_create_and_start,
    .set_egress = swarm_set_egress,
    .exec = swarm_exec,
    .stat = swarm_stat,
    .read_file = swarm_read_file,
    .write_file = swarm_write_file,
    .remove = swarm_remove,
    .list = swarm_list,
    .close = swarm_close,
};

int sl_swarm_launcher_create(uv_loop_t *loop, const struct sl_swarm_config *c,
                             struct sl_launcher **out)
{
    struct sl_docker *d;
    struct sl_docker_tls t;
    int rc;

    SL_ENSURE(loop != NULL && out != NULL && c != NULL, SL_EINVAL);
    t = (struct sl_docker_tls){
        .host = c->manager,
        .port = c->port,
        .ca_file = c->ca_file,
        .cert_file = c->cert_file,
        .key_file = c->key_file,
        .wall_image = c->wall_image,
    };
    SL_ENSURE(sl__docker_tls_ok(&t), SL_EINVAL);
    SL_ENSURE(c->n_proxies <= SL_SWARM_PROXIES_MAX && (c->n_proxies == 0 || c->proxies != NULL),
              SL_EINVAL);
    for (size_t i = 0; i < c->n_proxies; i++) {
        struct in_addr ia;

        SL_ENSURE(c->proxies[i].node != NULL && c->proxies[i].proxy != NULL
                          && inet_pton(AF_INET, c->proxies[i].node, &ia) == 1
                          && inet_pton(AF_INET, c->proxies[i].proxy, &ia) == 1,
                  SL_EINVAL);
    }
    SL_TRY(sl__docker_alloc(loop, &swarm_ops, &d));
    rc = sl__docker_set_tls(d, &t);
    if (rc < 0) {
        sl__docker_free_unused(d);
        return rc;
    }
    d->swarm_encrypted = c->encrypted;
    d->swarm_proxy_acked = c->proxy_acked;
    d->swarm_proxy_acked_arg = c->proxy_acked_arg;
    if (c->n_proxies > 0) {
        d->swarm_proxies = sl_calloc(c->n_proxies, sizeof(*d->swarm_proxies));
        if (d->swarm_proxies == NULL) {
            sl__docker_free_unused(d);
            return SL_ENOMEM;
        }
        d->n_swarm_proxies = c->n_proxies;
        for (size_t i = 0; i < c->n_proxies; i++) {
            (void)snprintf(d->swarm_proxies[i].node, sizeof(d->swarm_proxies[i].node), "%s",
                           c->proxies[i].node);
            (void)snprintf(d->swarm_proxies[i].proxy, sizeof(d->swarm_proxies[i].proxy), "%s",
                           c->proxies[i].proxy);
        }
    }
    *out = &d->base;
    return 0;
}
