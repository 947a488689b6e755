/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/swarm.h - the Docker Swarm backend of control/sandbox/launcher.h
 * (docs/scale-lab.md "The Swarm backend"): sandboxes placed by Swarm, one single-task service each,
 * on an attachable internal overlay network; every call on a sandbox's container goes to the
 * Engine API of the node that runs its task. Every engine is reached over TCP with TLS client
 * certificates (control/sandbox/docker_http), the manager's for the services, tasks, nodes,
 * configs and networks, each node's at its address (the node's Status.Addr) and the same port
 * for the rest. It is the Docker backend with other operations in front: one libcurl multi
 * handle on the loop for every engine, and the Docker operations themselves (exec, stat,
 * read_file, write_file, set_egress, has_image) routed to the task's node.
 *
 * How the operations map onto the APIs:
 *   ping             GET /info of the manager: Swarm.ControlAvailable must be true
 *   ensure_network   GET /networks/NAME of the manager, POST /networks/create when missing
 *                    (overlay, attachable, internal, the subnet and gateway, label
 *                    sluice.managed=1, `encrypted` when the config asks for it); an existing
 *                    one with other settings is SL_EEXIST naming the difference (the bridge
 *                    name of the request means nothing on an overlay and is not checked)
 *   has_image        the manager's engine (GET /images/NAME/json): each node must have the image
 *                    itself (Swarm does not copy it; docs/scale.md)
 *   pull_image       refused (SL_EINVAL): this backend does not pull yet; load or pull the image
 *                    on every node
 *   create_and_start the spec's command program (cmd[0], one of its files: the runner) becomes a
 *                    Swarm config named by its content's hash (POST /configs/create, shared by
 *                    every sandbox; an existing one must hold the same bytes) mounted at that
 *                    path; POST /services/create: one replica, restart condition none, endpoint
 *                    mode dnsrr, the spec's command, environment, labels (on the service and the
 *                    container), CPU, memory and a pids limit, init, NET_RAW and NET_ADMIN
 *                    dropped, on the spec's network alone; the task list read every 200 ms until
 *                    its task runs (a task that failed or was rejected fails the create with
 *                    Swarm's message); GET /nodes/ID for its node's address; then on that node's
 *                    engine the other files and directories (PUT archive), the container's
 *                    inspect (its address on the network) and the inner wall (a helper
 *                    container, docker_wall.c). Any failure after the service was made removes
 *                    the service. The command waits (`sluice-run --idle`), so nothing of the
 *                    image runs before the wall is in place; without a wall image a create
 *                    with an inner wall fails before anything is made
 *   the rest         an id is SERVICE.CONTAINER.NODE_ADDRESS (a sandbox that runs; just
 *                    SERVICE in a listing when its task does not run); exec, stat, read_file,
 *                    write_file and set_egress are the Docker backend's on CONTAINER at
 *                    NODE_ADDRESS's engine
 *   remove           DELETE /services/SERVICE of the manager (404 is success); the node removes
 *                    the task's container itself
 *   list             GET /services?filters={"label":[KEY]}, GET /tasks (desired state running),
 *                    GET /nodes of the manager: a service runs when its task runs on a node
 *                    that is Ready; the entry's address is the task's on its first network
 *
 * Proxies per node (sl_swarm_config proxies; docs/scale-lab.md "second slice"): a sandbox's only
 * peer on the overlay is the proxy of its own node. When the launcher is given the nodes'
 * proxies, a create first reads GET /nodes of the manager and picks, in turn, a Ready node of
 * availability active that has one; the service is pinned there (Placement constraint
 * node.id==ID), the spec's proxy_name goes into its hosts file with that proxy's address
 * (ContainerSpec.Hosts), and the inner wall allows that address instead of the spec's. Given
 * proxy_acked, a node is a candidate only when its proxy acknowledged the create's
 * snapshot_version (the snapshot with the sandbox's entry): a node whose proxy is down or
 * behind gets no new sandbox. A set_egress does the same for the node its id names. No such
 * node: the create fails (SL_EUNAVAILABLE), nothing made.
 *
 * Not done yet (docs/scale-lab.md): pulling; the spec's resolv_conf (a host file: the sandbox keeps
 * Docker's own, whose resolver the inner wall closes); no-new-privileges (Engine API 1.41 has no
 * such setting for a service).
 *
 * Results, deadlines and closing are the Docker backend's (docker.h); messages start "docker: "
 * for a call to an engine and "swarm: " for what this file decides.
 */
#ifndef SL_CONTROL_SANDBOX_SWARM_H
#define SL_CONTROL_SANDBOX_SWARM_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "base/err.h"
#include "control/sandbox/launcher.h"

/* Most proxies (nodes with a proxy) a launcher takes. */
#define SL_SWARM_PROXIES_MAX 64

/* A node (its IPv4 address, Status.Addr) and its proxy's IPv4 address on the sandbox network. */
struct sl_swarm_proxy {
    const char *node;
    const char *proxy;
};

/* The newest policy snapshot version the proxy of the node at `node` (its address, as in
 * sl_swarm_proxy) acknowledged and still holds, as far as the caller knows; 0 for none yet, -1
 * when the proxy is unreachable now or fed by nobody (such a node gets no sandbox). */
typedef int64_t sl_swarm_proxy_acked_fn(void *arg, const char *node);

/* Where the swarm is and how to reach it. Borrowed for the call (copied). */
struct sl_swarm_config {
    /* A manager node's IPv4 address; every engine's TCP port (2376). */
    const char *manager;
    uint16_t port;
    /* PEM files: the CA of the engines' server certificates (each names its node's address),
     * our client certificate and its key. */
    const char *ca_file;
    const char *cert_file;
    const char *key_file;
    /* The image, present on every node, of the inner wall's helper (docker.h struct
     * sl_docker_tls); NULL: creates with an inner wall fail. */
    const char *wall_image;
    /* Create the sandbox network with --opt encrypted, and refuse an existing one without. */
    bool encrypted;
    /* The proxies on the sandbox network, one per node: `n_proxies` pairs of the node's address
     * (its Status.Addr) and its proxy's address on the sandbox network. With none, a create's
     * egress address is used as given and Swarm places the task. With some, the launcher places
     * every sandbox itself (below) on a Ready, active node that has a proxy, in turn. */
    const struct sl_swarm_proxy *proxies;
    size_t n_proxies;
    /* Optional (NULL: every node with a proxy will do): placement skips a node whose proxy has
     * not acknowledged the create's snapshot_version (launcher.h). */
    sl_swarm_proxy_acked_fn *proxy_acked;
    void *proxy_acked_arg;
};

/* Creates the launcher; makes no request yet. Returns 0 with `*out`, SL_EINVAL for an
 * incomplete config, SL_ENOMEM or SL_EIO. Release with (*out)->ops->close(). */
SL_MUST_CHECK int sl_swarm_launcher_create(uv_loop_t *loop, const struct sl_swarm_config *c,
                                           struct sl_launcher **out);

#endif
