/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/docker_int.h - what the files of the Docker backend share, and nobody else:
 * the launcher, its operations and the calls between the three files.
 *
 *   docker.c       the operations' allocation, completion and release, the checks they
 *                  share, ping, has_image, remove, ensure_network, and the launcher's creation
 *                  and close;
 *   docker_files.c       stat, read_file and write_file;
 *   docker_containers.c  create_and_start, exec and list;
 *   docker_pull.c  pull_image: images/create with its progress stream (read by
 *                  control/sandbox/dockerpull) and X-Registry-Auth;
 *   docker_wall.c  the inner wall (create_and_start's last step, set_egress): the container's
 *                  network namespace from its inspect, control/sandbox/firewall on the thread
 *                  pool;
 *   docker_http.c  the transport: libcurl's multi interface driven by the loop (one uv_poll_t per
 *                  socket curl opens, one uv_timer_t for its timeouts), one HTTP call at a time
 *                  per operation, and the reading of the answers;
 *   docker_tar.c   the tar archives (libarchive) built for create and write_file and read for
 *                  read_file, in memory.
 *
 * Everything runs on the launcher's loop thread, but the inner wall's netlink work.
 */
#ifndef SL_CONTROL_SANDBOX_DOCKER_INT_H
#define SL_CONTROL_SANDBOX_DOCKER_INT_H

#include <arpa/inet.h>
#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/list.h"
#include "control/sandbox/docker.h"
#include "control/sandbox/dockerframe.h"
#include "control/sandbox/launcher.h"
#include "control/sandbox/swarm.h"

/* The longest unix socket path (sun_path less its terminator). */
#define SL__DOCKER_SOCKET_PATH_MAX 107u
/* The deadline of a control operation, and the cap of one transfer's time within it. */
#define SL__DOCKER_DEADLINE_MS 30000u
/* The longest request URL. */
#define SL__DOCKER_URL_MAX (16u * 1024u)
/* An operation's error text, terminator included. */
#define SL__DOCKER_ERR_MAX 512u
/* The longest X-Docker-Container-Path-Stat header value kept. */
#define SL__DOCKER_STAT_HDR_MAX 4096u
/* The cap of a control call's answer (all but an exec's stream and a read_file's tar). */
#define SL__DOCKER_BODY_MAX (8u * 1024u * 1024u)
/* Launches that failed to allocate their operation, reported from a timer. */
#define SL__DOCKER_OOM_NOTES 32u

enum sl__docker_op_kind {
    SL__DOCKER_OP_PING = 0,
    SL__DOCKER_OP_NETWORK,
    SL__DOCKER_OP_IMAGE,
    SL__DOCKER_OP_CREATE,
    SL__DOCKER_OP_EXEC,
    SL__DOCKER_OP_STAT,
    SL__DOCKER_OP_READ,
    SL__DOCKER_OP_WRITE,
    SL__DOCKER_OP_REMOVE,
    SL__DOCKER_OP_LIST,
    SL__DOCKER_OP_EGRESS,
    SL__DOCKER_OP_PULL,
};

union sl__docker_op_cb {
    sl_launcher_done_fn *done;
    sl_launcher_started_fn *started;
    sl_launcher_exec_fn *exec;
    sl_launcher_stat_fn *stat;
    sl_launcher_read_fn *read;
    sl_launcher_list_fn *list;
    sl_launcher_pulled_fn *pulled;
};

/* One socket libcurl asked the loop to watch. */
struct sl__docker_sock {
    uv_poll_t poll;
    curl_socket_t fd;
    struct sl_docker *d;
    /* Link in the launcher's socks. */
    struct sl_list link;
};

/* swarm.c: the most Swarm configs one service mounts (the runner, the resolv.conf). */
#define SL__DOCKER_CONFIGS_MAX 2

/* swarm.c: one Swarm config a service mounts, all owned: its name (after its mode and bytes),
 * its id once made or found, its bytes in base64, and the body of its create request. */
struct sl__docker_config {
    char *name;
    char *id;
    char *data;
    char *req;
    size_t req_len;
};

/* One launcher operation: a short sequence of HTTP calls, one at a time. Loop thread only. */
struct sl__docker_op {
    struct sl_docker *d;
    /* The engine this operation's requests go to, an IPv4 address at d->port (TLS as the
     * launcher's), owned; NULL: the launcher's own engine. */
    char *host;
    /* Link in the launcher's ops. */
    struct sl_list link;
    enum sl__docker_op_kind kind;
    union sl__docker_op_cb cb;
    void *arg;
    /* Loop time (uv_now, ms) at which the operation gives up; 0 for none (an exec without
     * deadline_ms). */
    uint64_t deadline_ms;
    /* Deferred completion, the exec's 50 ms exit-code polls. Freed op after its close. */
    uv_timer_t timer;
    bool finished;
    /* Set when the transfer in flight cannot go on (a socket could not be watched); the
     * operation completes from its timer with the error already recorded. */
    bool failing;

    /* The transfer in flight (NULL between transfers) and what it collected. */
    CURL *easy;
    struct curl_slist *hdrs;
    struct sl_buf resp;
    size_t resp_max;
    bool resp_over;
    bool oom;
    long status;
    CURLcode cc;
    /* The errno of a failed connect (CURLINFO_OS_ERRNO), 0 otherwise. */
    long os_errno;
    /* This transfer's timeout is the operation's deadline, not the 30 s control cap. */
    bool timeout_is_deadline;
    /* The exec attach stream: a 200 body goes to the frame demultiplexer. */
    bool stream;
    bool stream_bad;
    char stat_hdr[SL__DOCKER_STAT_HDR_MAX];
    bool stat_seen;
    bool stat_over;
    char curl_err[CURL_ERROR_SIZE];
    void (*on_response)(struct sl__docker_op *o);

    /* The outcome. */
    int rc;
    char err[SL__DOCKER_ERR_MAX];

    /* Arguments (owned copies) and state of the kinds that need them. */
    char *id;
    char *path;
    char *dir;
    char *name;
    /* A request body (owned) kept until its transfer ends. */
    char *body;
    size_t body_len;
    char *tar;
    size_t tar_len;
    size_t max;
    /* ensure_network */
    char *bridge;
    char *subnet;
    char *gateway;
    bool retried;
    /* create_and_start and set_egress: the inner wall to install (docker_wall.c); NULL when
     * there is none. */
    struct sl__docker_wall *wall;
    /* create_and_start */
    char *network;
    char ip[64];
    int saved_rc;
    char saved_err[SL__DOCKER_ERR_MAX];
    /* exec */
    char *exec_id;
    struct sl_dockerframe frames;
    struct sl_buf out;
    struct sl_buf errout;
    /* Bytes kept of each stream (the exec's max_stdout/max_stderr). */
    size_t max_out;
    size_t max_err;
    bool out_truncated;
    bool err_truncated;
    bool deadline_passed;
    int exit_code;
    int polls;
    /* stat / read_file; a symbolic link's target as the daemon resolved it (absolute, in the
     * container), and how many links were followed. */
    bool is_dir;
    uint64_t size;
    uint32_t mode;
    char *link_target;
    int hops;
    uint8_t *data;
    size_t data_len;
    /* list: ids still to inspect, and what was found. */
    json_t *ids;
    size_t next_id;
    json_t *found;
    /* pull_image (docker_pull.c): the stream's reader, the reference, the progress reported. */
    struct sl__docker_pull *pull;
    enum sl_launcher_pull_failure pull_why;
    /* swarm.c: the service, the task's container, the configs the service mounts (the
     * runner's, then the resolv.conf naming the node's proxy), the next one to make, whether
     * the spec asked for that resolv.conf, and how many times the task list was read. */
    char *service;
    char *cid;
    struct sl__docker_config configs[SL__DOCKER_CONFIGS_MAX];
    size_t n_configs;
    size_t config_at;
    bool proxy_dns;
    int task_polls;
    /* swarm.c: how many times the placement waited for the proxy of the node in turn. */
    int place_polls;
    /* swarm.c placement: the snapshot version the chosen node's proxy must hold (the spec's
     * snapshot_version). */
    int64_t snapshot_version;
    /* One more request header line ("Name: value", owned, wiped when freed: it may carry a
     * credential), sent with every request of the operation; NULL for none. */
    char *extra_hdr;
};

/* swarm.c: a node (its address, the node's Status.Addr) and its proxy's address on the sandbox
 * network. */
struct sl__swarm_proxy {
    char node[INET_ADDRSTRLEN];
    char proxy[INET_ADDRSTRLEN];
};

struct sl__docker_oom_note {
    enum sl__docker_op_kind kind;
    union sl__docker_op_cb cb;
    void *arg;
};

struct sl_docker {
    /* First: the launcher interface. */
    struct sl_launcher base;
    uv_loop_t *loop;
    /* Where the engine is: its unix socket (the default launcher), or "" and TCP with TLS: the
     * origin "https://HOST:PORT" and the client's files (the CA that signs the engines'
     * certificates, the client certificate and its key), all owned. */
    char socket_path[SL__DOCKER_SOCKET_PATH_MAX + 1];
    char *origin;
    char *ca_file;
    char *cert_file;
    char *key_file;
    /* The TCP port of every engine an operation is routed to (o->host; swarm.c). */
    unsigned port;
    /* The engine the next operation allocated goes to (copied into its o->host): set by swarm.c
     * around a call of a Docker operation on a task's container, NULL otherwise. */
    const char *route;
    /* The image of the wall helper (docker_wall.c), owned; NULL when the engine is not on this
     * host and there is none: then an inner wall cannot be installed (create fails). */
    char *wall_image;
    /* swarm.c: the sandbox network must be an encrypted overlay. */
    bool swarm_encrypted;
    /* swarm.c: each node's proxy (owned; none: the egress addresses are used as given), and
     * the turn of the next placement among the nodes that have one. */
    struct sl__swarm_proxy *swarm_proxies;
    size_t n_swarm_proxies;
    size_t swarm_turn;
    /* swarm.c: what a node's proxy acknowledged (sl_swarm_config proxy_acked); NULL: not asked. */
    sl_swarm_proxy_acked_fn *swarm_proxy_acked;
    void *swarm_proxy_acked_arg;
    CURLM *multi;
    /* libcurl's timeout. */
    uv_timer_t timer;
    /* Reports launches whose operation could not be allocated. */
    uv_timer_t oom_timer;
    struct sl__docker_oom_note oom[SL__DOCKER_OOM_NOTES];
    size_t n_oom;
    /* Operations not yet finished (struct sl__docker_op.link) and the sockets libcurl asked
     * the loop to watch (struct sl__docker_sock.link). */
    struct sl_list ops;
    struct sl_list socks;
    /* One socket record allocated ahead, so that curl's socket callback need not allocate. */
    struct sl__docker_sock *spare;
    bool closing;
    bool shut;
    int pending_closes;
    void (*closed)(void *arg);
    void *closed_arg;
};

/* ---- docker.c ---- */

/* The Docker backend's operations, for control/sandbox/swarm to route to a node's engine. */
extern const struct sl_launcher_ops sl__docker_ops;

/* Records the outcome `rc` of `o` with a printf-style message, made one line (control bytes of
 * a daemon's text become spaces). */
void sl__docker_set_err(struct sl__docker_op *o, int rc, const char *fmt, ...) SL_PRINTF(3, 4);

/* Reports the outcome of `o` once and releases it (freed after its timer closes). */
void sl__docker_op_finish(struct sl__docker_op *o);

/* Completes `o` from its timer, on the next loop iteration, with the outcome recorded. For a
 * transfer that cannot go on from inside a libcurl callback (o->failing). */
void sl__docker_op_finish_soon(struct sl__docker_op *o);

/* Drops the transfer in flight and completes `o` with its recorded error from the loop, never
 * from the caller's stack. */
void sl__docker_fail_soon(struct sl__docker_op *o);

/*
 * Allocates an operation of `kind` with a control deadline, linked into the launcher. On OOM
 * the callback is still reported from the loop (SL_ENOMEM) and NULL is returned. A launcher
 * that is closing gets an operation that completes with SL_ECANCELED; the caller sees
 * o->rc < 0 and must not start anything.
 */
struct sl__docker_op *sl__docker_op_new(struct sl_docker *d, enum sl__docker_op_kind kind,
                                        union sl__docker_op_cb cb, void *arg);

/* sl__docker_op_new() for an operation on the container `id` of launcher `l`: NULL, with
 * nothing more to do (the callback is reported from the loop), when it cannot start or `id` is
 * not a valid container id. */
struct sl__docker_op *sl__docker_op_on(struct sl_launcher *l, const char *id,
                                       enum sl__docker_op_kind kind, union sl__docker_op_cb cb,
                                       void *arg);

/* Fails `o` from the loop with a validation error (SL_EINVAL). */
void sl__docker_reject(struct sl__docker_op *o, const char *fmt, ...) SL_PRINTF(2, 3);

/* For the result of starting a request: when it failed (`rc` < 0), completes `o` with its error
 * from the loop. */
void sl__docker_go(struct sl__docker_op *o, int rc);

/* Docker names and ids: [A-Za-z0-9][A-Za-z0-9_.-]*, at most 128 characters. */
bool sl__docker_is_name(const char *s);
/* NAME=value with a non-empty name. */
bool sl__docker_is_env(const char *s);
/* 1 to `max` characters of an IP address or CIDR block (hex digits, '.', ':', '/'). */
bool sl__docker_is_ip_text(const char *s, size_t max);

/* Returns a new copy of `j` compact-serialised in sl_malloc memory (*len bytes), or NULL. */
char *sl__docker_dump_json(const json_t *j, size_t *len);
/* The string member `key` of `obj`, or NULL. */
const char *sl__docker_json_str(const json_t *obj, const char *key);

/* Allocates a launcher of `ops` on `loop`, libcurl set up, its engine not yet named. Returns 0
 * with *out, SL_ECRYPTO, SL_ENOMEM or SL_EIO (nothing left). */
SL_MUST_CHECK int sl__docker_alloc(uv_loop_t *loop, const struct sl_launcher_ops *ops,
                                   struct sl_docker **out);
/* Releases a launcher of sl__docker_alloc() that never ran an operation; the memory goes when
 * the loop has closed its handles. */
void sl__docker_free_unused(struct sl_docker *d);
/* Is `t` a complete description of an engine over TLS (docker.h)? */
bool sl__docker_tls_ok(const struct sl_docker_tls *t);
/* Makes `d` talk to the engine `t` names (sl__docker_tls_ok(t) holds): 0 or SL_ENOMEM. */
SL_MUST_CHECK int sl__docker_set_tls(struct sl_docker *d, const struct sl_docker_tls *t);

/* ---- docker_files.c and docker_containers.c: the operations of struct sl_launcher_ops ---- */

void sl__docker_stat(struct sl_launcher *l, const char *id, const char *path,
                     sl_launcher_stat_fn *cb, void *arg);
void sl__docker_read_file(struct sl_launcher *l, const char *id, const char *path, size_t max,
                          sl_launcher_read_fn *cb, void *arg);
void sl__docker_write_file(struct sl_launcher *l, const char *id, const char *path,
                           const void *data, size_t len, unsigned mode, sl_launcher_done_fn *cb,
                           void *arg);
void sl__docker_create_and_start(struct sl_launcher *l, const struct sl_launcher_container *spec,
                                 sl_launcher_started_fn *cb, void *arg);
void sl__docker_exec(struct sl_launcher *l, const char *id, const struct sl_launcher_exec *e,
                     sl_launcher_exec_fn *cb, void *arg);
void sl__docker_list(struct sl_launcher *l, const char *label_key, sl_launcher_list_fn *cb,
                     void *arg);

/* Checks a create spec (names, paths, modes, limits): true, or false with `o` rejected. */
bool sl__docker_create_spec_ok(struct sl__docker_op *o, const struct sl_launcher_container *s);
/* Builds o->tar from the spec's directories and files, leaving out the file at `skip` (NULL:
 * none); no tar when nothing is left. Returns 0, SL_ETOOBIG, SL_ENOMEM or SL_EIO. */
SL_MUST_CHECK int sl__docker_create_tar(struct sl__docker_op *o,
                                        const struct sl_launcher_container *s, const char *skip);

/* Reports the outcome of a list operation: its entries (docker_containers.c). */
void sl__docker_deliver_list(struct sl__docker_op *o);

/* ---- docker_pull.c ---- */

void sl__docker_pull_image(struct sl_launcher *l, const struct sl_launcher_pull *p,
                           sl_launcher_progress_fn *progress, sl_launcher_pulled_fn *cb, void *arg);

/* Feeds `n` bytes of a 200 answer of images/create to the pull's reader and reports progress.
 * Returns false when the transfer must stop (out of memory). */
bool sl__docker_pull_feed(struct sl__docker_op *o, const char *p, size_t n);

/* Frees o->pull (and wipes o->extra_hdr) when `o` is released. */
void sl__docker_pull_release(struct sl__docker_op *o);

/* ---- docker_wall.c ---- */

struct sl__docker_wall;

void sl__docker_set_egress(struct sl_launcher *l, const char *id,
                           const struct sl_launcher_egress *e, sl_launcher_done_fn *cb, void *arg);

/* Checks `e` and gives `o` a copy to install (o->wall). Returns 0, or o->rc with o->err set
 * (SL_EINVAL, SL_ENOMEM). */
SL_MUST_CHECK int sl__docker_wall_prepare(struct sl__docker_op *o,
                                          const struct sl_launcher_egress *e);

/* Installs o->wall in the network namespace `inspected` (the container's inspect, borrowed for
 * the call) names, on the thread pool; `done(o)` runs on the loop afterwards (or at once when
 * the install cannot start) with o->rc 0 or < 0 and o->err. */
void sl__docker_wall_start(struct sl__docker_op *o, json_t *inspected,
                           void (*done)(struct sl__docker_op *o));

/* The step after a created container's inspect, for both backends: checks the answer, takes its
 * address on o->network into o->ip, then installs o->wall (when there is one) and runs
 * `done(o)` afterwards, as sl__docker_wall_start does; without a wall `done(o)` runs at once.
 * `who` starts the message of a container without an address ("docker: the container", "swarm:
 * the task's container"). Returns false with o->rc and o->err set, `done` not run: the caller
 * fails the create. */
SL_MUST_CHECK bool sl__docker_address_then_wall(struct sl__docker_op *o, const char *who,
                                                void (*done)(struct sl__docker_op *o));

/* Lets go of o->wall when `o` is released: freed, or left to free itself when the pool still
 * runs it. */
void sl__docker_wall_release(struct sl__docker_op *o);

/* Moves the prepared wall of `o` to the IPv4 address `address` (the Swarm backend's placement
 * chose the proxy). Returns 0, or SL_EINVAL (o->err set) for an address that is not one. */
SL_MUST_CHECK int sl__docker_wall_set_address(struct sl__docker_op *o, const char *address);

/* ---- docker_http.c ---- */

/* Sets up libcurl (the global state and the multi handle, driven by d->loop and d->timer).
 * Returns 0, or SL_EIO with nothing left to clean up. */
SL_MUST_CHECK int sl__docker_http_init(struct sl_docker *d);

/* Ends every transfer and closes the sockets and the timer of libcurl (each close counted in
 * d->pending_closes). */
void sl__docker_http_shutdown(struct sl_docker *d);

/* Counts one close of the launcher's handles (or the launcher's own reference) as done; after
 * the last one runs `closed`, frees the launcher and cleans up libcurl's global state. */
void sl__docker_maybe_freed(struct sl_docker *d);

/*
 * Starts one HTTP call for `o`: `method` on the API base + `path` (already escaped), with `body`
 * (borrowed until the transfer ends; NULL for none) of type `ctype`. `resp_max` caps the body
 * kept. `done` runs from the loop when it ends. Returns 0 or < 0 with o->rc/err set.
 */
SL_MUST_CHECK int sl__docker_start_request(struct sl__docker_op *o, const char *method,
                                           const char *path, const void *body, size_t body_len,
                                           const char *ctype, size_t resp_max,
                                           void (*done)(struct sl__docker_op *o));

/* Like sl__docker_start_request(), with the path built printf-style. */
SL_MUST_CHECK int sl__docker_start_requestf(struct sl__docker_op *o, const char *method,
                                            const void *body, size_t body_len, const char *ctype,
                                            size_t resp_max, void (*done)(struct sl__docker_op *o),
                                            const char *fmt, ...) SL_PRINTF(8, 9);

/* Ends the transfer in flight (if any) without looking at its result. */
void sl__docker_drop_transfer(struct sl__docker_op *o);

/*
 * Looks at the transfer that just ended. Returns 0 when it completed with status `ok1` or
 * `ok2`; otherwise sets o->rc/err ("docker: <daemon message>" when the daemon sent one) and
 * returns o->rc. `what` names the call for messages without a daemon text.
 */
int sl__docker_check_response(struct sl__docker_op *o, const char *what, long ok1, long ok2);

/* Parses the response body as a JSON object (a new reference), or sets o->rc/err (NULL). */
json_t *sl__docker_response_object(struct sl__docker_op *o, const char *what);

/* Appends `s` percent-encoded (RFC 3986 unreserved characters kept) to `b`. */
SL_MUST_CHECK int sl__docker_append_escaped(struct sl_buf *b, const char *s);

/* ---- docker_tar.c ---- */

/* An entry of a tar to build: a directory when data is NULL. */
struct sl__docker_tar_item {
    const char *name;
    unsigned mode;
    const void *data;
    size_t len;
};

/* Builds a tar of `items` (owner root, relative names) into a new sl_malloc'd buffer (*out,
 * *len). Returns 0, SL_ETOOBIG (over 1 GiB), SL_ENOMEM or SL_EIO. */
SL_MUST_CHECK int sl__docker_tar_build(const struct sl__docker_tar_item *items, size_t n,
                                       char **out, size_t *len);

/*
 * Takes the single regular file out of the tar in o->resp into o->data (o->data_len bytes and
 * a terminator; over o->max bytes is SL_ETOOBIG with o->size). A tar holding anything else is an
 * error: the daemon is trusted only as far as its bytes check out. Returns 0 or o->rc.
 */
int sl__docker_tar_extract_one(struct sl__docker_op *o);

#endif
