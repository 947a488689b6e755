/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/sandbox.h - sandboxes (docs/reference/api.md §5.3, docs/reference/containers.md
 * §5.4): containers whose only way out is the proxy, created for a repository, driven by
 * exec/read/write calls, closed, stopped when idle or expired.
 *
 * The manager lives on the control plane's loop and talks to the container runtime only
 * through control/sandbox/launcher.h. It holds every open sandbox in memory: its id, the proxy
 * token the container uses (`Proxy-Authorization: Basic base64(id:token)`), its owner, repository,
 * environment, container and address. The daemon compiles these into the policy snapshot as
 * client entries (sl_sandboxes_clients()), pushes it, and reports back which snapshot version
 * holds which state (sl_sandboxes_built()) and what every proxy acknowledged
 * (sl_sandboxes_acked()). The ordering promises rest on that:
 *   - a container starts only after the proxies it uses acknowledged a snapshot holding its
 *     client entry, so its first request is never refused for want of an identity (every proxy
 *     on one host; with proxies per node, the create waits for one of them and the launcher
 *     places the container on a node whose proxy holds the entry: sl_sandboxes_acked());
 *   - a close answers only after every proxy acknowledged a snapshot without the entry (or
 *     5 s passed), so a closed sandbox's token is refused (407) once the close returned.
 *
 * Life of a sandbox: starting (entry pushed, image pulled when it must be, container created and
 * started behind its inner wall) -> ready (the create answers; the repository is cloned in the
 * background, a call that comes meanwhile waits for the clone, and a failed clone answers every
 * exec, read and write 409 `the clone failed: REASON`) -> closing (container removed, entry
 * dropped) -> gone. Creation has 3 minutes; past them, or on any failure, whatever was made is
 * removed and the caller gets 503 `the sandbox container did not start; try again` (or the
 * precise 4xx, 502 or 504, such as 422 `unknown ref` for a malformed ref, 424 `image not found:
 * NAME` or `registry authentication failed for HOST`, 502 `registry unreachable: HOST: ...`,
 * 504 for a pull still running at the limit). A ready sandbox without calls for
 * `idle_timeout_ms` (a clone in progress and a waiting call count as use) and one whose
 * lifetime ended are closed by a once-a-second sweep.
 *
 * Restarts: a clean stop (sl_sandboxes_close) removes every sandbox of this network; at start
 * (sl_sandboxes_start) containers of this network left by a crash are removed before the
 * manager reports ready. No orphan survives, and no container runs without the host's table
 * (control/sandbox/firewall) that outlives a crashed control plane, nor without its own inner
 * wall: the launcher installs it before it reports the container started (the container's
 * process is the runner waiting, `sluice-run --idle`, so nothing of the image runs before), and
 * a container whose wall could not be installed never starts (503).
 *
 * Git: the repository comes from the git platform (control/git/gitplat.h): the clone URL and
 * the credential the proxy puts on the sandbox's requests to its own repository (the entry's
 * `git` object, docs/reference/snapshot.md §3). Who may create and call sandboxes is the API's
 * to check (the repository's roles, its archived flag); the git access each entry carries is
 * worked out again at every snapshot build (sl_sandbox_clients_refresh()), so a user who is
 * disabled or loses the repository loses the entry, and a lower role or an archived repository
 * lowers the access, at the next snapshot.
 *
 * Results go to a reply callback as (HTTP status, JSON body): {"message"} for errors of the
 * request or the service, {"error"} for errors raised inside the sandbox (docs/reference/api.md
 * §5.3).
 *
 * Threads: every function on the loop's thread.
 * Lifecycle: sl_sandboxes_create() -> sl_sandboxes_start() -> calls -> sl_sandboxes_close().
 */
#ifndef SL_CONTROL_SANDBOX_SANDBOX_H
#define SL_CONTROL_SANDBOX_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "base/err.h"
#include "control/env/snapshot.h"
#include "control/git/gitplat.h"
#include "control/sandbox/launcher.h"
#include "control/store/model.h"

/* docs/reference/api.md §5.3 limits. */
#define SL_SANDBOX_MAX_OPEN_PER_REPO  5
#define SL_SANDBOX_OUTPUT_MAX         ((size_t)1 << 20)
#define SL_SANDBOX_FILE_MAX           ((size_t)64 << 20)
#define SL_SANDBOX_DEFAULT_TIMEOUT_MS 600000u
#define SL_SANDBOX_START_TIMEOUT_MS   180000u
/* The clone's own limit; the calls that wait for it wait at most this long. */
#define SL_SANDBOX_CLONE_TIMEOUT_MS   600000u
#define SL_SANDBOX_DEFAULT_IDLE_S     1800u
#define SL_SANDBOX_DEFAULT_LIFETIME_S 86400u
/* Closed sandboxes whose owner the manager still remembers (sl_sandboxes_owned()). */
#define SL_SANDBOX_RECENT 256
/* Where the runner and the CA bundle are placed in every container. */
#define SL_SANDBOX_RUNNER_PATH "/opt/sluice/sluice-run"
#define SL_SANDBOX_CA_PATH     "/etc/sluice/ca-bundle.pem"
#define SL_SANDBOX_REPO_DIR    "/workspace/repo"
/* The domain of the commit email of a creator without one: NAME@users.noreply.sluice. */
#define SL_SANDBOX_NOREPLY_DOMAIN "users.noreply.sluice"
/* sluice's fixed ports on the gateway (docs/reference/containers.md §5.4): the DNS responder (UDP
 * and TCP) and the transparent HTTP and TLS listeners. */
#define SL_SANDBOX_DNS_PORT   53u
#define SL_SANDBOX_HTTP_PORT  80u
#define SL_SANDBOX_HTTPS_PORT 443u

struct sl_sandboxes; /* opaque */

/* Asks the daemon to build and push a new snapshot (the sandbox set changed). */
typedef void sl_sandboxes_changed_fn(void *arg);
/* Writes to `out` (`cap` bytes) which proxies have not acknowledged snapshot `version` (0: none
 * was built), for a person: the answer of a close that waited in vain. */
typedef void sl_sandboxes_unacked_fn(void *arg, int64_t version, char *out, size_t cap);
/* One answer: `body` is a new reference the callee takes (never NULL). */
typedef void sl_sandbox_reply_fn(void *arg, int status, json_t *body);

struct sl_sandboxes_config {
    /* Borrowed; must outlive the manager. */
    uv_loop_t *loop;
    struct sl_launcher *launcher;
    /* Network name (also the bridge's name, so at most 15 characters), its IPv4 subnet
     * CIDR and the proxy's port on the gateway. Copied. */
    const char *network;
    const char *subnet;
    unsigned proxy_port;
    /* The proxy's transparent listener for the ports rules name (`--transparent-port`). */
    unsigned redirect_port;
    /* The CA bundle placed in containers (system CAs + the sluice CA), PEM. Copied. */
    const void *ca_bundle;
    size_t ca_bundle_len;
    /* Host file bind-mounted over /etc/resolv.conf; NULL for the runtime's own. Copied. */
    const char *resolv_conf;
    /* The control plane as people use it (`http://LISTEN`: the REST API under /api/v1, MCP at
     * /mcp), put in every container as SLUICE_API_URL (a sandbox cannot reach it:
     * docs/reference/containers.md §5.4); NULL for none. Copied. */
    const char *api_url;
    /* The runner binary copied into containers. Borrowed (static data). */
    const void *runner;
    size_t runner_len;
    /* The git platform (borrowed; must outlive the manager): clone URLs, and the credentials
     * revoked when their sandbox closes. Without a remote, /workspace/repo starts empty. */
    struct sl_gitplat *git;
    /* 0 takes the defaults above. */
    uint64_t idle_timeout_ms;
    uint64_t lifetime_ms;
    uint64_t start_timeout_ms;
    /* Called when the snapshot must change. */
    sl_sandboxes_changed_fn *changed;
    void *changed_arg;
    /* Optional (NULL: a generic text): names what did not acknowledge a close. */
    sl_sandboxes_unacked_fn *unacked;
    void *unacked_arg;
    /* The proxy's host in the containers' HTTP_PROXY, for a launcher that chooses each
     * container's proxy (launcher.h proxy_name: the Swarm backend, its node's proxy); NULL: the
     * gateway's address. Copied. */
    const char *proxy_name;
    /* Every this many ms the launcher's list is compared with the open sandboxes: a ready one
     * whose container no longer runs (its node was lost) is closed, its container removed;
     * 0: never (the Docker backend: a container goes only when sluice removes it). */
    uint64_t reconcile_ms;
};

/* Everything a create needs, prepared by the API from the database (off the loop): the
 * caller, the repository and the resolved environment (docs/reference/api.md §5.2), values opened.
 * Every string is owned by the spec (sl_malloc); sl_sandbox_spec_free() frees it. */
struct sl_sandbox_spec {
    /* The creator's user id, name and email (NULL for none): the name for log lines and, with
     * the email, for git commits (GIT_AUTHOR_NAME, ...). */
    char *owner_id;
    char *owner_name;
    char *owner_email;
    /* `owner/name`. */
    char *repo;
    /* The creator's role in the repository now (the sandbox's git access never goes above it,
     * nor above write). */
    enum sl_repo_role role;
    /* The git platform's credential for this sandbox (all NULL without a remote); the spec, and
     * then the sandbox, owns it. */
    struct sl_gitplat_credential git_cred;
    /* The ref asked for; NULL for the default branch. */
    char *ref;
    /* The environment's id and name; NULL when none applies (network off, no variables). */
    char *env_id;
    char *env_name;
    char *image;
    /* Pull the image at every start (else only when the runtime lacks it). */
    bool image_pull_always;
    /* The registry's credentials for `image`, the password opened (wiped when freed); both
     * NULL for an anonymous pull. Never placed in the container. */
    char *registry_username;
    char *registry_password;
    int64_t cpus_centi;
    int64_t memory_bytes;
    /* `NAME=value` strings of the environment's variables, values opened. */
    char **env;
    size_t n_env;
    /* Values replaced by `***` in command output: secret variables and the environment's
     * credential values. */
    char **secrets;
    size_t n_secrets;
    /* The variables of the environment's placeholder credentials (their `placeholder_env`,
     * docs/reference/snapshot.md §3): the sandbox gets a random placeholder in each, never the
     * value, and its snapshot entry the placeholders. */
    char **placeholder_envs;
    size_t n_placeholder_envs;
    /* Started by a job (control/jobs/jobs): not counted against, nor refused by, the per-account
     * limit of SL_SANDBOX_MAX_OPEN_PER_REPO; the job pool's concurrency bounds them. */
    bool job;
};

void sl_sandbox_spec_free(struct sl_sandbox_spec *spec);

/* The caller of a sandbox call. Strings borrowed for the call. */
struct sl_sandbox_caller {
    const char *user_id;
    /* May call every sandbox of the repository (a global admin, an admin of the repository),
     * not only their own. */
    bool any_sandbox;
};

/* Validates and copies `cfg`. Returns 0, SL_EINVAL (with `err` set: a bad subnet or network
 * name) or SL_ENOMEM. */
SL_MUST_CHECK int sl_sandboxes_create(const struct sl_sandboxes_config *cfg,
                                      struct sl_sandboxes **out, char *err, size_t errlen);

/* Checks the runtime, creates the network, removes leftover containers of this network, then
 * reports ready (sl_sandboxes_status). Failures are logged and reported by the status; calls
 * get 503 meanwhile. */
void sl_sandboxes_start(struct sl_sandboxes *sb);

/* True once sl_sandboxes_start() finished (network up, leftovers removed) and until a close. */
bool sl_sandboxes_is_ready(const struct sl_sandboxes *sb);

/* Writes the gateway of the IPv4 subnet `cidr` (its first address: 10.213.0.0/24 ->
 * 10.213.0.1), where the proxy listens for the containers, to `gateway`. Returns 0, or
 * SL_EINVAL when `cidr` is not an IPv4 network address with a prefix of 8 to 29 bits. Pure;
 * `sluice up` uses it too. */
SL_MUST_CHECK int sl_sandboxes_subnet_gateway(const char *cidr, char *gateway, size_t cap);

/* The gateway address (the proxy's listen address), e.g. "10.213.0.1". */
const char *sl_sandboxes_gateway(const struct sl_sandboxes *sb);

/* True when `token` is the proxy token of an open sandbox (such a token is not an API
 * token: the API answers 403). Constant-time per candidate. */
bool sl_sandboxes_is_token(const struct sl_sandboxes *sb, const char *token);

/* POST .../sandboxes: takes `spec`. Replies 201 {"id","ref","environment"} or an error. */
void sl_sandboxes_open(struct sl_sandboxes *sb, struct sl_sandbox_spec *spec,
                       sl_sandbox_reply_fn *reply, void *arg);

/* POST .../sandboxes/{id}/{action}: action "exec", "read", "write" or "close"; `body` is the
 * parsed request body (borrowed; NULL when it was empty). A close answers 204 once every proxy
 * acknowledged a snapshot without the sandbox's entry, or 503 naming those that did not within
 * 5 s (the sandbox is gone either way). */
void sl_sandboxes_call(struct sl_sandboxes *sb, const struct sl_sandbox_caller *caller,
                       const char *repo, const char *id, const char *action, json_t *body,
                       sl_sandbox_reply_fn *reply, void *arg);

/* GET .../sandboxes: the caller's open sandboxes in `repo`, or in every repository when `repo`
 * is NULL (GET /api/v1/sandboxes). A new array of {"id","repo","ref","environment","status",
 * "clone","created_at","expires_at"}, status "pulling" (then "pull": {"image","layers",
 * "layers_done","bytes","bytes_total"}), "starting" or "ready"; NULL when out of memory. */
json_t *sl_sandboxes_list(const struct sl_sandboxes *sb, const struct sl_sandbox_caller *caller,
                          const char *repo);

/* Who created each sandbox the manager knows: the open ones and the last SL_SANDBOX_RECENT
 * closed ones. A new object {"<sandbox id>":"<owner user id>"}; NULL when out of memory. The
 * audit tail (GET /api/v1/audit) shows a non-admin the lines of the clients they own. */
json_t *sl_sandboxes_owners(const struct sl_sandboxes *sb);

/* A copy of the client entries for a snapshot build (used off the loop). */
struct sl_sandbox_clients {
    struct sl_snapshot_build_client *items;
    size_t n;
    /* The state generation the copy holds; pass it to sl_sandboxes_built(). */
    uint64_t generation;
    /* The git platform to refresh the entries with (borrowed). */
    struct sl_gitplat *git;
    /* Owned storage behind `items`. */
    void *_mem;
};

/* Fills `out` (caller storage) with the open sandboxes' entries as the manager knows them: id,
 * token, address, expiry, environment, and the git host's rule (without a credential). Returns
 * 0 or SL_ENOMEM. Loop thread. */
SL_MUST_CHECK int sl_sandboxes_clients(const struct sl_sandboxes *sb,
                                       struct sl_sandbox_clients *out);

/*
 * Blocking (the snapshot build's job): asks the git platform about each entry's creator and
 * repository now. An entry whose creator has no role left in it (removed, disabled, the
 * repository deleted) leaves `c`; the others get their `git` object (docs/reference/snapshot.md
 * §3) with the access of sl_git_access_of() when the platform has a remote. A repository whose
 * record is damaged gives its entries no git object and a `problem` for the build's report.
 * Returns 0, or an error of the platform (the build fails: nothing is left out by mistake).
 */
SL_MUST_CHECK int sl_sandbox_clients_refresh(struct sl_sandbox_clients *c);
/* Frees a copy (secrets wiped). A zeroed one is fine. */
void sl_sandbox_clients_free(struct sl_sandbox_clients *c);

/* The TCP ports the rules of the network's environments name (the snapshot build's
 * report->named_ports; SL_SNAPSHOT_PORT_SET_BYTES bytes, borrowed). Every container's inner wall
 * lets it reach these on the gateway besides sluice's own ports (the proxy port, 53, 80, 443 and
 * the redirect port): a new container gets them at its start, and when they changed, the open
 * ones get a new wall (through the launcher's set_egress; one that fails is logged and keeps
 * its old wall, so the new ports stay closed to it). Call it before sl_sandboxes_built() for the
 * same build. */
void sl_sandboxes_set_named_ports(struct sl_sandboxes *sb, const uint8_t *ports);

/* Snapshot `version` holds the state of `generation`. */
void sl_sandboxes_built(struct sl_sandboxes *sb, uint64_t generation, int64_t version);
/* Every proxy acknowledged `by_all`, and at least one proxy a create can use acknowledged
 * `by_one` (the same value when every container uses every proxy, as on one host; the newest
 * version a node's proxy acknowledged when each node has its own: the Swarm backend, which then
 * places the container on a node whose proxy holds its entry, launcher.h snapshot_version). */
void sl_sandboxes_acked(struct sl_sandboxes *sb, int64_t by_all, int64_t by_one);

/* Adds {"ready","network","gateway","open","error"} as "sandboxes" to `doc`. */
void sl_sandboxes_status(const struct sl_sandboxes *sb, json_t *doc);

/* Removes every sandbox (containers and entries), answers calls in flight with 503, then
 * `closed(arg)` runs once and the memory is gone. */
void sl_sandboxes_close(struct sl_sandboxes *sb, void (*closed)(void *arg), void *arg);

#endif
