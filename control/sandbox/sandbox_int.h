/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/sandbox_int.h - what the files of the sandbox manager share, and nobody
 * else: the manager, its sandboxes and the calls between the files.
 *
 *   sandbox.c        the registry, waiting for the proxies, removal, the sweep, the snapshot
 *                    client entries, the inner walls' ports, start, status and close, the
 *                    manager's creation;
 *   sandbox_open.c   opening a sandbox (its image pulled when it must be), and the clone of its
 * repository in the background; sandbox_calls.c  exec, read and write in an open one (parked while
 * the clone runs).
 *
 * Everything runs on the manager's loop thread.
 */
#ifndef SL_CONTROL_SANDBOX_SANDBOX_INT_H
#define SL_CONTROL_SANDBOX_SANDBOX_INT_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "control/sandbox/sandbox.h"

/* Sizes of a sandbox's id ("sb_" and 16 hex digits) and token ("sbt_" and 43 base64url
 * characters), terminators included, with room to spare. */
#define SL__SANDBOX_ID_MAX    24
#define SL__SANDBOX_TOKEN_MAX 64
/* The longest path in a sandbox that a call takes. */
#define SL__SANDBOX_PATH_MAX 4096
/* Time beyond the command's own limit (and the runner's 5 s grace) before an exec is
 * abandoned: the runner should have ended everything long before. */
#define SL__SANDBOX_EXEC_SLACK_MS 30000u
/* The container labels that find a manager's sandboxes again (after a restart). */
#define SL__SANDBOX_LABEL         "sluice.sandbox"
#define SL__SANDBOX_LABEL_NETWORK "sluice.network"

enum sl__sandbox_state {
    SL__SANDBOX_STARTING = 0,
    SL__SANDBOX_READY,
    SL__SANDBOX_CLOSING,
    SL__SANDBOX_GONE,
};

/* The clone of the repository, in the background once the container runs (docs/reference/api.md
 * §5.3): none without a git platform. */
enum sl__sandbox_clone {
    SL__SANDBOX_CLONE_NONE = 0,
    SL__SANDBOX_CLONE_RUNNING,
    SL__SANDBOX_CLONE_DONE,
    SL__SANDBOX_CLONE_FAILED,
};

/* A call (exec, read, write) that arrived while the clone runs: it goes on when the clone ends.
 * Owned by the sandbox's list; `body` is a reference. */
struct sl__sandbox_parked {
    struct sl__sandbox_parked *next;
    char action[8];
    json_t *body;
    sl_sandbox_reply_fn *reply;
    void *arg;
};

struct sl_sandboxes;

/* Waits until every proxy (or, with `one`, one a create can use) acknowledged a snapshot
 * holding state generation `gen`. */
struct sl__sandbox_waiter {
    struct sl__sandbox_waiter *next;
    uint64_t gen;
    /* The first snapshot version holding `gen`, 0 until built. */
    int64_t version;
    /* Wait for sl_sandboxes_acked()'s `by_one` rather than `by_all` (a create). */
    bool one;
    /* uv_now() deadline. */
    uint64_t deadline;
    bool linked;
    void (*done)(struct sl__sandbox_waiter *w, bool acked);
};

struct sl__sandbox {
    struct sl__sandbox *next;
    struct sl_sandboxes *sb;
    int refs;
    enum sl__sandbox_state state;
    char id[SL__SANDBOX_ID_MAX];
    char token[SL__SANDBOX_TOKEN_MAX];
    char *owner_id;
    char *repo;
    /* The creator's role in the repository when it was created. */
    enum sl_repo_role role;
    /* The git platform's credential for it (members NULL without a remote). */
    struct sl_gitplat_credential cred;
    char *ref;
    char *env_id;
    char *env_name;
    char *container;
    char ip[INET_ADDRSTRLEN];
    /* uv_now() when its container was reported started. */
    uint64_t running_since;
    /* The generation of the named ports (struct sl_sandboxes ports_gen) its inner wall holds,
     * or was last tried with; the one being installed while `wall_busy`. */
    uint64_t wall_gen;
    uint64_t wall_sending;
    bool wall_busy;
    /* Wall-clock creation and expiry (Unix seconds), loop-clock deadlines and last use. */
    int64_t created_unix;
    int64_t expires_unix;
    uint64_t start_deadline;
    uint64_t last_used;
    /* Calls in flight: an exec counts as use until it returns. */
    int busy;
    /* A job's sandbox: outside the per-account limit. */
    bool job;
    char **secrets;
    size_t n_secrets;
    /* Its placeholders: `n_placeholders` variables and the placeholder in each (policy/
     * placeholder.h), made at the open, in the container's environment and in its snapshot
     * entry. */
    char **ph_env;
    char **ph_value;
    size_t n_placeholders;
    /* The clone: its state, why it failed ("unknown ref", git's words; owned), and the calls
     * waiting for it, oldest first. */
    enum sl__sandbox_clone clone;
    char *clone_error;
    struct sl__sandbox_parked *parked;
    struct sl__sandbox_parked **parked_tail;
    /* The image pull of the create in progress (the list's status `pulling`), and how far it
     * got. */
    bool pulling;
    struct sl_launcher_pull_progress pull;
    /* The create in progress: its spec and its answer. */
    struct sl_sandbox_spec *spec;
    sl_sandbox_reply_fn *reply;
    void *reply_arg;
    struct sl__sandbox_waiter wait;
};

struct sl_sandboxes {
    struct sl_sandboxes_config cfg;
    char network[64];
    char subnet[64];
    char gateway[INET_ADDRSTRLEN];
    char *ca_bundle;
    char *resolv_conf;
    char *api_url;
    char *proxy_name;
    uv_timer_t sweep;
    /* The reconciliation (cfg.reconcile_ms): a list is in flight, when it was asked for, and
     * when the next one is due. */
    bool reconciling;
    uint64_t reconcile_started;
    uint64_t reconcile_at;
    struct sl__sandbox *list;
    struct sl__sandbox_waiter *waiters;
    uint64_t generation;
    uint64_t built_gen;
    int64_t built_version;
    /* sl_sandboxes_acked(): what every proxy, and what one proxy a create can use, acknowledged. */
    int64_t acked;
    int64_t acked_one;
    bool ready;
    bool closing;
    /* The launcher's close has been asked for (once). */
    bool shutting;
    char error[256];
    /* The ports the rules name (sl_sandboxes_set_named_ports()), and a count of their changes. */
    uint8_t named_ports[SL_SNAPSHOT_PORT_SET_BYTES];
    uint64_t ports_gen;
    int pending_removes;
    /* create_and_start calls not yet reported: the launcher closes only after the last one (a
     * container created while the control plane stops must be removed, not orphaned). */
    int starting;
    void (*closed)(void *arg);
    void *closed_arg;

    /* The last SL_SANDBOX_RECENT closed sandboxes' ids and owners (a ring; `n_recent` counts
     * every close), so that their audit lines stay theirs after the close. */
    struct {
        char id[SL__SANDBOX_ID_MAX];
        char owner_id[40];
    } recent[SL_SANDBOX_RECENT];

    uint64_t n_recent;
};

/* ---- sandbox.c ---- */

/* Once the manager is closing and nothing is left in flight (removals, starts, sandboxes),
 * closes the launcher and then the manager. */
void sl__sandboxes_maybe_closed(struct sl_sandboxes *sb);

/* The platform's remote, or NULL when sandboxes get no repository. */
const struct sl_gitplat_remote *sl__sandbox_remote(const struct sl_sandboxes *sb);

/* Frees the `n` strings of `v` (zeroed first when `wipe`) and the array. NULL is fine. */
void sl__sandbox_free_strv(char **v, size_t n, bool wipe);

/* {key: text}, a new reference (NULL on OOM). */
json_t *sl__sandbox_message(const char *key, const char *text);

/* Answers through `reply` with {"message": text} or {"error": text}. */
void sl__sandbox_reply_msg(sl_sandbox_reply_fn *reply, void *arg, int status, const char *text);
void sl__sandbox_reply_err(sl_sandbox_reply_fn *reply, void *arg, int status, const char *text);

/* Unix seconds as RFC 3339 UTC into `out` of `cap` bytes. */
void sl__sandbox_rfc3339(int64_t unix_s, char *out, size_t cap);

/* The sandbox with this id that is not gone, or NULL. */
struct sl__sandbox *sl__sandbox_find(const struct sl_sandboxes *sb, const char *id);

/* Drops one reference; the last one frees the sandbox. */
void sl__sandbox_unref(struct sl__sandbox *s);

/* The set of sandboxes changed: a new state generation, and the daemon is told (cfg.changed,
 * not while closing) so that a snapshot holding it gets built. */
void sl__sandbox_changed(struct sl_sandboxes *sb);

/* Calls `done` once every proxy (with `one`: one proxy a create can use, sl_sandboxes_acked())
 * acknowledged a snapshot holding the current state generation, or with `acked` false after
 * `timeout_ms`. w->version is then that snapshot's version. */
void sl__sandbox_wait_for_proxies(struct sl_sandboxes *sb, struct sl__sandbox_waiter *w, bool one,
                                  uint64_t timeout_ms,
                                  void (*done)(struct sl__sandbox_waiter *w, bool acked));

/* Takes `s` out: its entry leaves the snapshot and its container is removed. `reply` (may be
 * NULL) gets `body` with `status` once the container is gone, or, when `body` is NULL, 204 once
 * both happened (the proxies' acknowledgement is awaited up to 5 s). Takes `body`. */
void sl__sandbox_remove_with(struct sl__sandbox *s, const char *why, sl_sandbox_reply_fn *reply,
                             void *arg, int status, json_t *body);

/* sl__sandbox_remove_with() answering 204 (or 502 when the container could not be removed). */
void sl__sandbox_remove(struct sl__sandbox *s, const char *why, sl_sandbox_reply_fn *reply,
                        void *arg);

/* A sandbox's inner wall (launcher.h): TCP to the gateway on sluice's ports and the named
 * ones, UDP to its port 53. `e` points into the struct: it stays where it was filled. */
struct sl__sandbox_egress {
    struct sl_launcher_egress e;
    /* Owned. */
    uint16_t *tcp;
    uint16_t udp[1];
};

/* Fills `out` with the wall of the current named ports. Returns 0 or SL_ENOMEM. */
SL_MUST_CHECK int sl__sandbox_egress_init(const struct sl_sandboxes *sb,
                                          struct sl__sandbox_egress *out);
void sl__sandbox_egress_finish(struct sl__sandbox_egress *e);

/* Brings the inner wall of `s` (a container that runs) to the current named ports when they
 * changed since it got its wall; one update at a time per sandbox. */
void sl__sandbox_sync_wall(struct sl__sandbox *s);

/* ---- sandbox_calls.c ---- */

/* Runs the calls parked on `s` now that its clone ended (or the sandbox is gone: they are
 * answered 409 `the sandbox was closed`, 503 `the control plane is stopping` in a stop). */
void sl__sandbox_unpark(struct sl__sandbox *s);

/* `n` bytes of a command's output as one line that is safe to answer: the secrets of `s`
 * redacted, cut to `max` bytes, control characters as spaces, trailing blanks dropped, valid
 * UTF-8. Owned by the caller; NULL when out of memory. */
char *sl__sandbox_output_line(const struct sl__sandbox *s, const char *p, size_t n, size_t max);

/* ---- sandbox_open.c ---- */

/* Fails the creation of `s` in progress: answers `status` with {key: text} and removes what
 * was made. */
void sl__sandbox_create_failed(struct sl__sandbox *s, int status, const char *key,
                               const char *text);

/* Fails the creation of `s` whose image pull outlasted the start limit (504). */
void sl__sandbox_pull_timed_out(struct sl__sandbox *s);

#endif
