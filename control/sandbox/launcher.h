/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/launcher.h - the container runtime as the sandbox code sees it
 * (docs/reference/README.md §5.3-5.4).
 *
 * One interface with two backends today: control/sandbox/docker (the Docker Engine API over its
 * unix socket or TCP with TLS, libcurl's multi interface driven by the control plane's libuv loop;
 * the default of the control plane) and control/sandbox/swarm (a Docker Swarm: one single-task
 * service per sandbox, container calls to the task's node; `sluice control --launcher swarm`).
 * Another backend (Kubernetes) would fill another struct sl_launcher_ops; control/sandbox/sandbox
 * never knows which one it talks to.
 *
 * Rules every backend keeps:
 *   - Every operation is asynchronous and runs on the loop the launcher was created on; it
 *     never blocks. Callbacks run on that loop, never synchronously from the call that
 *     started the operation (even on an immediate error), exactly once.
 *   - Strings and buffers in a callback's arguments are borrowed until the callback returns.
 *   - `err` in a result is a one-line message for a person (the daemon's message when there
 *     is one), never containing a secret from the request (environment values, file data).
 *   - Operations have their own deadlines (30 s for control calls unless said otherwise) so a
 *     wedged daemon can never hang a caller forever; an exec's deadline is the caller's.
 *
 * Lifecycle: a backend's constructor (sl_docker_launcher_create) -> operations ->
 * l->ops->close(l, closed, arg): operations in flight complete with SL_ECANCELED first, then
 * `closed(arg)` runs once and the memory is gone.
 */
#ifndef SL_CONTROL_SANDBOX_LAUNCHER_H
#define SL_CONTROL_SANDBOX_LAUNCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct sl_launcher;

/* The network sandboxes live on (docs/reference/containers.md §5.4). */
struct sl_launcher_network {
    /* Network name (`sluice0`) and the pinned bridge interface name (≤ 15 characters). */
    const char *name;
    const char *bridge;
    /* IPv4 CIDR and gateway address (the subnet's first address). */
    const char *subnet;
    const char *gateway;
};

/* What a container may reach over the network: the inner wall (docs/reference/containers.md
 * §5.4). Its own loopback, but 127.0.0.11 (Docker's embedded DNS); on one IPv4 address, the TCP
 * and UDP ports listed; nothing else, in either direction: every other packet it sends, and
 * every connection opened to it, is refused at once. Borrowed for the call. */
struct sl_launcher_egress {
    /* The IPv4 address (dotted) the ports are on: the network's gateway. */
    const char *address;
    /* Ports 1-65535 (duplicates are fine). */
    const uint16_t *tcp_ports;
    size_t n_tcp_ports;
    const uint16_t *udp_ports;
    size_t n_udp_ports;
};

/* A file placed into a created (not yet started) container. */
struct sl_launcher_file {
    /* Absolute path inside the container; parent directories are created. */
    const char *path;
    const void *data;
    size_t len;
    /* Permission bits (e.g. 0644, 0755). Owner root. */
    unsigned mode;
};

/* One label. */
struct sl_launcher_label {
    const char *key;
    const char *value;
};

/* Everything needed to create one sandbox container. Borrowed for the call. */
struct sl_launcher_container {
    /* Container name (unique; `sluice-<sandbox id>`). */
    const char *name;
    const char *image;
    /* The network (by name) it joins, and nothing else. */
    const char *network;
    /* `NAME=value` strings. */
    const char *const *env;
    size_t n_env;
    const struct sl_launcher_label *labels;
    size_t n_labels;
    /* CPU limit in hundredths of a CPU, memory limit in bytes; 0 = no limit. */
    int64_t cpus_centi;
    int64_t memory_bytes;
    /* Host file bind-mounted read-only over /etc/resolv.conf; NULL for the runtime's own. */
    const char *resolv_conf;
    /* Files copied in before start (the CA bundle, the runner, `/workspace/repo/` marker). */
    const struct sl_launcher_file *files;
    size_t n_files;
    /* Directories created (mode 0755, owner root) before start, such as /workspace/repo. */
    const char *const *dirs;
    size_t n_dirs;
    /* The container's process under the runtime's init, replacing the image's entrypoint and
     * command (`n_cmd` strings, the first an absolute path: a program of `files`, so that
     * nothing of the image runs before the inner wall is in place); NULL: `sleep infinity`. */
    const char *const *cmd;
    size_t n_cmd;
    /* The inner wall, in force before the callback reports the container started (a failure
     * to install it is a failure of the create: the container is removed). NULL: none (the
     * backend's own tests); the sandbox manager always gives one. A backend whose proxies are
     * per node (the Swarm backend given its nodes' proxies) replaces the address with that of
     * the proxy of the node it places the container on, here and in set_egress. */
    const struct sl_launcher_egress *egress;
    /* A host name that resolves, inside the container, to the address its inner wall allows
     * (the container's hosts file), for a backend that chooses that address itself (above);
     * NULL, or a backend that does not, leaves the hosts file alone. */
    const char *proxy_name;
    /* For a backend that chooses each container's proxy itself (above): that proxy is also the
     * container's only name server (a read-only /etc/resolv.conf naming it, with the options of
     * the file at resolv_conf), where the proxy's DNS responder answers. A backend that does not
     * choose the proxy ignores it (resolv_conf says what the container gets). */
    bool proxy_dns;
    /* The first policy snapshot version that holds the container's client entry (its proxy
     * identity), 0 for none. A backend that chooses each container's proxy (the Swarm backend)
     * places it only where that proxy acknowledged this version or a newer one. */
    int64_t snapshot_version;
};

/* A running container as a listing reports it. */
struct sl_launcher_entry {
    const char *id;
    const char *name;
    /* true when the container is running. */
    bool running;
    /* Its address on the sandbox network, "" when none. */
    const char *ip;
    /* Its labels and environment (`NAME=value`), as created. */
    const struct sl_launcher_label *labels;
    size_t n_labels;
    const char *const *env;
    size_t n_env;
};

/* One command to run in a container. Borrowed for the call. */
struct sl_launcher_exec {
    /* argv[0] is looked up in PATH. */
    const char *const *argv;
    size_t argc;
    /* Extra `NAME=value` strings on top of the container's environment. */
    const char *const *env;
    size_t n_env;
    /* Absolute working directory; NULL for the container's. */
    const char *cwd;
    /* Bytes kept of each stream; the rest is read and dropped (`truncated`). */
    size_t max_stdout;
    size_t max_stderr;
    /* Hard deadline for the whole call, 0 = none. When it passes, the stream is abandoned
     * and the result has `deadline_passed` (the command may still run inside: the caller's
     * runner is expected to have ended it before). */
    uint64_t deadline_ms;
};

struct sl_launcher_exec_result {
    /* 0, or < 0 when the command could not be run or awaited (then `err`). */
    int rc;
    const char *err;
    /* The exit status (128+N after signal N), -1 when unknown. */
    int exit_code;
    const char *out;
    size_t out_len;
    const char *errout;
    size_t errout_len;
    bool out_truncated;
    bool err_truncated;
    bool deadline_passed;
};

/* An image to pull from its registry. Borrowed for the call. */
struct sl_launcher_pull {
    /* The reference as an environment names it (`[HOST[:PORT]/]PATH[:TAG][@DIGEST]`; no tag
     * pulls `latest`, never every tag). */
    const char *image;
    /* The registry's credentials, or `username` NULL for an anonymous pull. The password is
     * never part of an `err`, a log line or anything the backend keeps after the call. */
    const char *username;
    const char *password;
    /* Milliseconds from now the whole pull may take; 0 for the 30 s of a control call. */
    uint64_t deadline_ms;
};

/* How far a pull got, summed over the image's layers. */
struct sl_launcher_pull_progress {
    size_t layers;
    size_t layers_done;
    uint64_t bytes_done;
    uint64_t bytes_total;
};

/* Why a pull failed (`err` says it for a person). */
enum sl_launcher_pull_failure {
    SL_LAUNCHER_PULL_OK = 0,
    /* The runtime itself failed or did not answer ("docker: ..."). */
    SL_LAUNCHER_PULL_RUNTIME,
    /* `image not found: IMAGE`: no such repository, tag or digest. */
    SL_LAUNCHER_PULL_NOT_FOUND,
    /* `registry authentication failed for HOST`. */
    SL_LAUNCHER_PULL_AUTH,
    /* `registry unreachable: HOST: WHY` (connection, DNS, TLS). */
    SL_LAUNCHER_PULL_UNREACHABLE,
    /* `image pull failed: IMAGE: WHY`: anything else. */
    SL_LAUNCHER_PULL_FAILED,
    /* The deadline passed first. */
    SL_LAUNCHER_PULL_DEADLINE,
};

/* Generic completion: rc 0 or < 0 with `err`. */
typedef void sl_launcher_done_fn(void *arg, int rc, const char *err);
/* Container created and started: its id and its address on the sandbox network. */
typedef void sl_launcher_started_fn(void *arg, int rc, const char *err, const char *id,
                                    const char *ip);
typedef void sl_launcher_exec_fn(void *arg, const struct sl_launcher_exec_result *r);
/*
 * A file read. rc: 0 with `data`/`len`; SL_ENOTFOUND (no such path, or a link to nothing),
 * SL_EISDIR (a directory), SL_ENOTFILE (a device, FIFO or socket), SL_ETOOBIG (larger than the
 * cap; `len` is then its size), other < 0 with `err`. Symbolic links are followed (resolved
 * inside the container).
 */
typedef void sl_launcher_read_fn(void *arg, int rc, const char *err, const void *data, size_t len);
/* Path metadata (of a symbolic link's target). rc: 0 with is_dir/size; SL_ENOTFOUND; other < 0
 * with `err`. */
typedef void sl_launcher_stat_fn(void *arg, int rc, const char *err, bool is_dir, uint64_t size);
/* Progress of a pull, each time it changed. It runs from inside the backend's transfer: it
 * records, and must not call the launcher. */
typedef void sl_launcher_progress_fn(void *arg, const struct sl_launcher_pull_progress *p);
/* A pull ended: rc 0 (`why` SL_LAUNCHER_PULL_OK) or < 0 with `why` and `err`. */
typedef void sl_launcher_pulled_fn(void *arg, int rc, enum sl_launcher_pull_failure why,
                                   const char *err);
typedef void sl_launcher_list_fn(void *arg, int rc, const char *err,
                                 const struct sl_launcher_entry *entries, size_t n);

struct sl_launcher_ops {
    /* Is the runtime reachable and answering? */
    void (*ping)(struct sl_launcher *l, sl_launcher_done_fn *cb, void *arg);
    /* Creates the network when missing. An existing network with the same name but other
     * settings (not internal, ICC on, another bridge name or subnet) is an error naming the
     * difference: the caller must not silently use a network that lets sandboxes talk. */
    void (*ensure_network)(struct sl_launcher *l, const struct sl_launcher_network *net,
                           sl_launcher_done_fn *cb, void *arg);
    /* Is `image` present locally? rc 0 yes, SL_ENOTFOUND no. */
    void (*has_image)(struct sl_launcher *l, const char *image, sl_launcher_done_fn *cb, void *arg);
    /* Pulls `p->image` from its registry (present or not: a present one is brought up to date),
     * reporting progress as it goes (`progress` may be NULL). */
    void (*pull_image)(struct sl_launcher *l, const struct sl_launcher_pull *p,
                       sl_launcher_progress_fn *progress, sl_launcher_pulled_fn *cb, void *arg);
    /* Creates the container (hardened per docs/reference/containers.md §5.4: default capabilities
     * minus NET_RAW and NET_ADMIN, no-new-privileges, an init process as PID 1, pids limit, no
     * restart), copies the files in, starts it, installs its inner wall, and reports its address
     * on the network. On any failure after the create, the container is removed before the
     * callback runs (nothing is left). */
    void (*create_and_start)(struct sl_launcher *l, const struct sl_launcher_container *spec,
                             sl_launcher_started_fn *cb, void *arg);
    /* Replaces the inner wall of a running container with `e`, in one step: the old rules hold
     * until the new ones do, and on failure (rc < 0) they stay. */
    void (*set_egress)(struct sl_launcher *l, const char *id, const struct sl_launcher_egress *e,
                       sl_launcher_done_fn *cb, void *arg);
    /* Runs one command (no stdin, no TTY), its output and error streams kept apart. */
    void (*exec)(struct sl_launcher *l, const char *id, const struct sl_launcher_exec *e,
                 sl_launcher_exec_fn *cb, void *arg);
    /* Metadata of an absolute path. */
    void (*stat)(struct sl_launcher *l, const char *id, const char *path, sl_launcher_stat_fn *cb,
                 void *arg);
    /* Reads a regular file (absolute path) up to `max` bytes. */
    void (*read_file)(struct sl_launcher *l, const char *id, const char *path, size_t max,
                      sl_launcher_read_fn *cb, void *arg);
    /* Writes a regular file (absolute path) with `mode`; its directory must exist (the caller
     * creates it). Overwrites an existing file; refuses (SL_EISDIR) to replace a directory. */
    void (*write_file)(struct sl_launcher *l, const char *id, const char *path, const void *data,
                       size_t len, unsigned mode, sl_launcher_done_fn *cb, void *arg);
    /* Kills and removes the container with its anonymous volumes. A container that is already
     * gone is success. */
    void (*remove)(struct sl_launcher *l, const char *id, sl_launcher_done_fn *cb, void *arg);
    /* Every container (running or not) that carries label `key` (any value). */
    void (*list)(struct sl_launcher *l, const char *label_key, sl_launcher_list_fn *cb, void *arg);
    /* See the top of this file. */
    void (*close)(struct sl_launcher *l, void (*closed)(void *arg), void *arg);
};

/* True for a path every launcher takes: absolute, at most 4096 bytes, without an empty, `.` or
 * `..` component (a trailing '/' is refused too). The sandbox calls check a client's path with
 * it before a launcher sees it, so that a bad one is the client's 400. */
bool sl_launcher_path_ok(const char *s);

/* The base every backend embeds first. */
struct sl_launcher {
    const struct sl_launcher_ops *ops;
};

#endif
