/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/control.c - the `sluice control` daemon: start-up checks, the loop, snapshot builds
 * (with the sandboxes' git access refreshed from the git platform, observes past their deadline
 * ended, and a build again at the next deadline) and their report, the waits of changes that
 * removed access until every proxy acknowledged them, signals and a graceful stop.
 */
#include "control/control.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>
#include <uv.h>

#include "base/buf.h"
#include "base/file.h"
#include "base/log.h"
#include "base/mem.h"
#include "control/env/pusher.h"
#include "control/env/snapshot.h"
#include "control/git/gitlocal.h"
#include "control/jobs/jobs.h"
#include "control/sandbox/docker.h"
#include "control/sandbox/firewall.h"
#include "control/sandbox/runner_blob.h"
#include "control/sandbox/sandbox.h"
#include "control/sandbox/swarm.h"
#include "control/store/secrets.h"
#include "control/store/store.h"
#include "control/web/api.h"
#include "http/server.h"
#include "policy/snapshot.h"

#define ERR_BYTES  512
#define PATH_BYTES 4096
/* How long a change that removed access waits for every proxy, and how often it looks. */
#define REVOKE_WAIT_MS 5000u
#define REVOKE_TICK_MS 100u
/* How long a stop lets the API answer the requests it holds (docs/reference/cli.md). */
#define STOP_GRACE_MS 10000u

/* One snapshot build on the thread pool. */
struct build {
    uv_work_t work;
    struct daemon *d;
    /* Its number among the builds started (struct daemon builds_started). */
    uint64_t seq;
    /* The sandbox entries to include (a copy made on the loop). */
    struct sl_sandbox_clients clients;
    /* The new version and document, or rc < 0; what was left out. */
    int64_t version;
    struct sl_buf doc;
    struct sl_snapshot_build_report report;
    /* The report as problems for GET /api/v1/status, each with its environment's owner (see
     * owned_problems()); NULL when the build failed or memory ran out. */
    json_t *problems;
    int rc;
    /* How long the build took on the thread pool (for GET /api/v1/status). */
    uint64_t took_ns;
    /* The host table whose redirect_ports set follows the build ("" when none), sluice's own
     * ports that are never redirected, and the outcome of the update. */
    char fw_table[80];
    unsigned proxy_port;
    unsigned redirect_port;
    int ports_rc;
    char ports_err[ERR_BYTES];
};

/* A change that removed access, waiting until every proxy acknowledged a snapshot built after
 * it (the API answers then, or with 503 after REVOKE_WAIT_MS). */
struct revoke_wait {
    struct revoke_wait *next;
    /* The first build that counts: one started after the change committed. */
    uint64_t want_build;
    /* The version that build got; 0 until it is done. */
    int64_t version;
    uint64_t deadline;
    sl_api_settled_fn *done;
    void *job;
};

struct daemon {
    uv_loop_t loop;
    uv_signal_t sig_term;
    uv_signal_t sig_int;
    uv_signal_t sig_usr1;
    uv_signal_t sig_hup;
    const struct sl_control_config *cfg;
    /* Why sandboxes are off when they were asked for (a --proxy-admin-socket), "" else. */
    char sandboxes_error[ERR_BYTES];
    struct sl_http_server *server;
    struct sl_api api;
    /* NULL without --proxy-admin-socket or --proxy-admin-url: then no snapshot is built. */
    struct sl_pusher *pusher;
    /* The client TLS context of --proxy-admin-url (the pusher borrows it), NULL without. */
    struct sl_http_tls *push_tls;
    /* Sandboxes, their runtime and the firewall table (NULL / "" when off). */
    struct sl_sandboxes *sandboxes;
    struct sl_launcher *launcher;
    char fw_table[80];
    bool fw_installed;

    /* The Swarm launcher's proxies: each node's address, its proxy's on the overlay, and the
     * pusher target (its admin URL names one of the two) that feeds it, -1 for none. */
    struct swarm_node {
        char node[INET6_ADDRSTRLEN];
        char proxy[INET6_ADDRSTRLEN];
        int target;
    } swarm_nodes[SL_CONTROL_SWARM_PROXIES_MAX];

    size_t n_swarm_nodes;
    /* The job pool and schedules (NULL when it could not be created). */
    struct sl_jobs *jobs;
    /* The git platform: repositories, roles, credentials. */
    struct sl_gitplat *git;
    /* A build is on the thread pool; `dirty`: a change committed since it started, so
     * another build follows (changes coalesce; the newest state always gets pushed). */
    bool building;
    bool dirty;
    bool stopping;
    uint64_t builds_started;
    /* The last build: when it succeeded, its report as problems (owned), and the error of the
     * last failed one ("" since a build succeeded). */
    char built_at[32];
    size_t built_bytes;
    uint64_t built_ns;
    json_t *problems;
    char build_error[200];
    /* Changes that removed access, waiting for the proxies; the timer runs while there are. */
    struct revoke_wait *waits;
    uv_timer_t wait_timer;
    bool wait_timer_open;
    /* A build at the next deadline of an environment's observe (learn mode), so that it leaves
     * the proxies' snapshot then (they end it by themselves at the deadline too). */
    uv_timer_t observe_timer;
    bool observe_timer_open;
};

void sl_control_config_init(struct sl_control_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->listen = SL_CONTROL_DEFAULT_LISTEN;
    cfg->docker_socket = SL_CONTROL_DEFAULT_DOCKER_SOCKET;
    cfg->network = SL_CONTROL_DEFAULT_NETWORK;
    cfg->subnet = SL_CONTROL_DEFAULT_SUBNET;
    cfg->proxy_port = SL_CONTROL_DEFAULT_PROXY_PORT;
    cfg->transparent_port = SL_CONTROL_DEFAULT_TRANSPARENT_PORT;
    cfg->swarm.port = SL_CONTROL_DEFAULT_SWARM_PORT;
    cfg->swarm.encrypted = true;
    cfg->log_level = SL_LOG_INFO;
}

/* Creates the data directory (0700) when it is missing. */
static int ensure_data_dir(const char *dir)
{
    char err[512];
    int rc = sl_file_ensure_dir(dir, "the data directory", err, sizeof(err));

    if (rc < 0) {
        sl_eprintf("control: %s", err);
    }
    return rc;
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

/* ---- snapshots: build on the pool, push from the loop ---- */

static void start_build(struct daemon *d);

/* The manager's inner walls and the host's table open the same fixed ports. */
_Static_assert(SL_SANDBOX_DNS_PORT == SL_FIREWALL_DNS_PORT
                       && SL_SANDBOX_HTTP_PORT == SL_FIREWALL_HTTP_PORT
                       && SL_SANDBOX_HTTPS_PORT == SL_FIREWALL_HTTPS_PORT,
               "one set of sluice's fixed ports");

/* On the pool: the host table redirects the ports the build's rules name, but sluice's own
 * (the proxy's listeners take those themselves), to the transparent listener. */
static int set_redirect_ports(struct build *b)
{
    const unsigned own[] = { b->proxy_port, b->redirect_port, SL_SANDBOX_DNS_PORT,
                             SL_SANDBOX_HTTP_PORT, SL_SANDBOX_HTTPS_PORT };
    uint16_t *ports = sl_calloc(65535, sizeof(*ports));
    size_t n = 0;
    int rc;

    if (ports == NULL) {
        (void)snprintf(b->ports_err, sizeof(b->ports_err), "out of memory");
        return SL_ENOMEM;
    }
    for (unsigned p = 1; p < 65536u; p++) {
        bool skip = false;

        if ((b->report.named_ports[p / 8] & (1u << (p % 8))) == 0) {
            continue;
        }
        for (size_t i = 0; i < SL_ARRAY_LEN(own); i++) {
            skip = skip || own[i] == p;
        }
        if (!skip) {
            ports[n++] = (uint16_t)p;
        }
    }
    rc = sl_firewall_set_redirect_ports(b->fw_table, ports, n, b->ports_err, sizeof(b->ports_err));
    sl_free(ports);
    return rc;
}

/* Ends the observes whose deadline passed (learn mode), each said in the log. Blocking: the
 * build's job. A failure is logged and leaves them to the next build: their deadline holds
 * anyway (the snapshot compiler and the proxy compare it with the time). */
static void end_observes(struct daemon *d)
{
    struct sl_env_row *ended = NULL;
    size_t n = 0;
    int rc = sl_store_env_end_observes(d->api.store, (int64_t)time(NULL), &ended, &n);

    if (rc < 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"cannot end the observes that are due\" err=%s",
               sl_strerror(rc));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        sl_log(SL_LOG_INFO, 0,
               "msg=\"environment leaves observe\" env=%s reason=deadline observe_until=%lld",
               ended[i].id, (long long)ended[i].observe_until);
    }
    sl_store_free_envs(ended, n);
}

/* The build's problems (sl_snapshot_build_report_problems()), each with "owner": the name of
 * the user who owns its environment, absent for a global one. A problem whose environment
 * cannot be read any more gets owner "" (no user has that name): nobody sees it. NULL when out
 * of memory. */
static json_t *owned_problems(struct sl_store *st, const struct sl_snapshot_build_report *r)
{
    json_t *arr = sl_snapshot_build_report_problems(r);
    json_t *item;
    size_t i;

    json_array_foreach(arr, i, item)
    {
        struct sl_env_row env;
        struct sl_user user;
        const char *owner = "";
        int rc;

        memset(&env, 0, sizeof(env));
        memset(&user, 0, sizeof(user));
        rc = sl_store_env_get(st, json_string_value(json_object_get(item, "environment")), &env);
        if (rc == 0 && env.scope == SL_SCOPE_GLOBAL) {
            owner = NULL;
        } else if (rc == 0 && sl_store_user_get(st, env.owner_id, &user) == 0) {
            owner = user.name;
        }
        rc = owner == NULL ? 0 : json_object_set_new(item, "owner", json_string(owner));
        sl_user_finish(&user);
        sl_env_row_finish(&env);
        if (rc < 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static void on_build(uv_work_t *w)
{
    struct build *b = SL_CONTAINER_OF(w, struct build, work);
    uint64_t start = uv_hrtime();

    end_observes(b->d);
    b->rc = sl_store_next_snapshot_version(b->d->api.store, &b->version);
    if (b->rc == 0) {
        /* Who has access now: a disabled creator, a lost role, an archived repository. */
        b->rc = sl_sandbox_clients_refresh(&b->clients);
    }
    if (b->rc == 0) {
        b->rc = sl_control_snapshot_build_with_clients(b->d->api.store, b->d->api.secrets,
                                                       b->version, b->clients.items, b->clients.n,
                                                       &b->doc, &b->report);
    }
    if (b->rc == 0) {
        b->problems = owned_problems(b->d->api.store, &b->report);
    }
    if (b->rc == 0 && b->fw_table[0] != '\0') {
        b->ports_rc = set_redirect_ports(b);
    }
    b->took_ns = uv_hrtime() - start;
}

/* ---- waits of changes that removed access ---- */

/* Writes which proxies have not acknowledged `version` (0: none was built). */
static void describe_unacked(struct daemon *d, int64_t version, char *out, size_t cap)
{
    size_t n = 0;
    size_t len;
    int w;

    if (version <= 0 || d->pusher == NULL) {
        (void)snprintf(out, cap,
                       "no snapshot holding it could be built or pushed (see the control plane's "
                       "log)");
        return;
    }
    out[0] = '\0';
    for (size_t i = 0; i < sl_pusher_targets(d->pusher); i++) {
        struct sl_pusher_target_status t;

        sl_pusher_target(d->pusher, i, &t);
        if (t.acked_version >= version) {
            continue;
        }
        len = strlen(out);
        w = snprintf(out + len, cap - len, "%s%s", n == 0 ? "" : ", ",
                     t.socket != NULL ? t.socket : t.url);
        if (w < 0 || (size_t)w >= cap - len) {
            break;
        }
        n++;
    }
    len = strlen(out);
    if (n == 0) {
        (void)snprintf(out, cap, "a proxy has not acknowledged snapshot %lld in time",
                       (long long)version);
        return;
    }
    {
        char who[400];

        (void)snprintf(who, sizeof(who), "%s", out);
        (void)snprintf(out, cap, "%s %s has not acknowledged snapshot %lld within %u s",
                       n == 1 ? "the proxy at" : "the proxies at", who, (long long)version,
                       REVOKE_WAIT_MS / 1000);
    }
}

static void on_sandboxes_unacked(void *arg, int64_t version, char *out, size_t cap)
{
    describe_unacked(arg, version, out, cap);
}

/* Ends the wait `*pp` (taken out of the list) with `failure` (NULL: acknowledged). */
static void end_wait(struct revoke_wait **pp, const char *failure)
{
    struct revoke_wait *w = *pp;
    char text[600];

    *pp = w->next;
    if (failure != NULL) {
        (void)snprintf(text, sizeof(text), "the change is saved, but %s", failure);
    }
    w->done(w->job, failure != NULL ? text : NULL);
    sl_free(w);
}

/* Ends the waits whose snapshot every proxy holds, and those past their deadline. */
static void check_waits(struct daemon *d)
{
    int64_t acked = d->pusher != NULL ? sl_pusher_acked_by_all(d->pusher) : 0;
    uint64_t now = uv_now(&d->loop);
    struct revoke_wait **pp = &d->waits;

    while (*pp != NULL) {
        struct revoke_wait *w = *pp;
        char why[500];

        if (w->version > 0 && acked >= w->version) {
            end_wait(pp, NULL);
        } else if (now >= w->deadline) {
            describe_unacked(d, w->version, why, sizeof(why));
            end_wait(pp, why);
        } else {
            pp = &w->next;
        }
    }
    if (d->waits == NULL && d->wait_timer_open) {
        (void)uv_timer_stop(&d->wait_timer);
    }
}

static void on_wait_tick(uv_timer_t *t)
{
    check_waits(t->data);
}

/* A build ended: the waits it covers learn its version, or fail with it. */
static void builds_done(struct daemon *d, uint64_t seq, int64_t version, const char *failure)
{
    struct revoke_wait **pp = &d->waits;

    while (*pp != NULL) {
        struct revoke_wait *w = *pp;

        if (w->version != 0 || w->want_build > seq) {
            pp = &w->next;
        } else if (failure != NULL) {
            end_wait(pp, failure);
        } else {
            w->version = version;
            pp = &w->next;
        }
    }
    check_waits(d);
}

static void start_build(struct daemon *d);

static void on_api_revoked(void *arg, sl_api_settled_fn *done, void *job)
{
    struct daemon *d = arg;
    struct revoke_wait *w;

    if (d->pusher == NULL || d->stopping || !d->wait_timer_open) {
        /* No proxy to wait for (no snapshot is built at all), or the end is near. */
        done(job, d->pusher == NULL ? NULL
                                    : "the change is saved, but the control plane is "
                                      "stopping");
        return;
    }
    w = sl_calloc(1, sizeof(*w));
    if (w == NULL) {
        done(job, "the change is saved, but the control plane ran out of memory waiting for the "
                  "proxies");
        start_build(d);
        return;
    }
    w->want_build = d->builds_started + 1;
    w->deadline = uv_now(&d->loop) + REVOKE_WAIT_MS;
    w->done = done;
    w->job = job;
    w->next = d->waits;
    d->waits = w;
    (void)uv_timer_start(&d->wait_timer, on_wait_tick, REVOKE_TICK_MS, REVOKE_TICK_MS);
    start_build(d);
}

static void on_observe_deadline(uv_timer_t *t)
{
    start_build(t->data);
}

/* Builds again at `at` (Unix seconds; 0: no environment is in observe), a second after it so
 * that the deadline has passed for the compiler too. */
static void arm_observe_timer(struct daemon *d, int64_t at)
{
    int64_t now = (int64_t)time(NULL);

    if (!d->observe_timer_open) {
        return;
    }
    (void)uv_timer_stop(&d->observe_timer);
    if (at > 0) {
        (void)uv_timer_start(&d->observe_timer, on_observe_deadline,
                             (uint64_t)(at > now ? at - now : 0) * 1000u + 1000u, 0);
    }
}

static void on_build_done(uv_work_t *w, int status)
{
    struct build *b = SL_CONTAINER_OF(w, struct build, work);
    struct daemon *d = b->d;
    int rc = b->rc;

    (void)status;
    if (rc < 0) {
        char why[300];

        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot build the policy snapshot\" err=%s", sl_strerror(rc));
        (void)snprintf(d->build_error, sizeof(d->build_error),
                       "snapshot %lld could not be built: %s", (long long)b->version,
                       sl_strerror(rc));
        (void)snprintf(why, sizeof(why), "%s (see the control plane's log)", d->build_error);
        builds_done(d, b->seq, 0, why);
    } else {
        json_t *problems = b->problems;
        time_t now = time(NULL);
        struct tm tm;

        /* What the last good build left out, for GET /api/v1/status. */
        json_decref(d->problems);
        d->problems = problems;
        b->problems = NULL;
        d->build_error[0] = '\0';
        d->built_bytes = b->doc.len;
        d->built_ns = b->took_ns;
        if (gmtime_r(&now, &tm) == NULL
            || strftime(d->built_at, sizeof(d->built_at), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
            d->built_at[0] = '\0';
        }
    }
    if (rc == 0 && b->ports_rc < 0) {
        /* Fails closed: a port missing from the set is refused, not let through. */
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"cannot update the ports the host's table redirects to the transparent "
               "listener\" err=\"%s\"",
               b->ports_err);
    }
    if (rc == 0 && d->sandboxes != NULL) {
        /* Before sl_sandboxes_built(): a container waiting for this build starts with them. */
        sl_sandboxes_set_named_ports(d->sandboxes, b->report.named_ports);
    }
    if (rc == 0 && d->pusher != NULL) {
        rc = sl_pusher_push(d->pusher, b->version, b->doc.p, b->doc.len);
        if (rc < 0) {
            sl_log(SL_LOG_ERROR, 0,
                   "msg=\"cannot hand the snapshot to the pusher\" version=%lld "
                   "err=%s",
                   (long long)b->version, sl_strerror(rc));
        } else {
            sl_log(SL_LOG_DEBUG, 0, "msg=\"snapshot built\" version=%lld bytes=%zu",
                   (long long)b->version, b->doc.len);
            if (d->sandboxes != NULL) {
                sl_sandboxes_built(d->sandboxes, b->clients.generation, b->version);
            }
        }
        builds_done(d, b->seq, rc == 0 ? b->version : 0,
                    rc == 0 ? NULL : "the snapshot could not be handed to the pusher");
    }
    if (rc == 0) {
        arm_observe_timer(d, b->report.next_observe_end);
    }
    sl_snapshot_build_report_finish(&b->report);
    json_decref(b->problems);
    sl_sandbox_clients_free(&b->clients);
    /* The document holds credentials in plaintext. */
    if (b->doc.p != NULL) {
        sodium_memzero(b->doc.p, b->doc.len);
    }
    sl_buf_finish(&b->doc);
    sl_free(b);
    d->building = false;
    if (d->dirty) {
        start_build(d);
    }
}

static void start_build(struct daemon *d)
{
    struct build *b;

    if (d->pusher == NULL || d->stopping) {
        return;
    }
    if (d->building) {
        d->dirty = true;
        return;
    }
    d->dirty = false;
    b = sl_calloc(1, sizeof(*b));
    if (b == NULL) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot build the policy snapshot\" err=%s",
               sl_strerror(SL_ENOMEM));
        return;
    }
    b->d = d;
    if (d->fw_installed) {
        (void)snprintf(b->fw_table, sizeof(b->fw_table), "%s", d->fw_table);
        b->proxy_port = d->cfg->proxy_port;
        b->redirect_port = d->cfg->transparent_port;
    }
    sl_buf_init(&b->doc, SL_SNAPSHOT_MAX_BYTES);
    if (d->sandboxes != NULL && sl_sandboxes_clients(d->sandboxes, &b->clients) < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot build the policy snapshot\" err=%s",
               sl_strerror(SL_ENOMEM));
        sl_free(b);
        return;
    }
    if (uv_queue_work(&d->loop, &b->work, on_build, on_build_done) < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot queue the snapshot build\"");
        sl_sandbox_clients_free(&b->clients);
        sl_free(b);
        return;
    }
    b->seq = ++d->builds_started;
    d->building = true;
}

static void on_api_changed(void *arg)
{
    start_build(arg);
}

static void on_jobs_queued(void *arg)
{
    struct daemon *d = arg;

    sl_jobs_kick(d->jobs);
}

static int prepare_job(void *arg, const char *user_id, const char *repo, const char *ref,
                       const char *envkey, struct sl_sandbox_spec **spec, json_t **env, char *err,
                       size_t errlen)
{
    struct daemon *d = arg;

    return sl_api_prepare_sandbox(&d->api, user_id, repo, ref, envkey, spec, env, err, errlen);
}

/* The job pool runs on the sandboxes (when they are on) and the schedule timer. */
static void setup_jobs(struct daemon *d, const struct sl_control_config *cfg)
{
    struct sl_jobs_config jc = {
        .loop = &d->loop,
        .store = d->api.store,
        .sandboxes = d->sandboxes,
        .concurrency = cfg->job_concurrency,
        .prepare = prepare_job,
        .prepare_arg = d,
    };
    int rc = sl_jobs_create(&jc, &d->jobs);

    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"jobs are off\" err=%s", sl_strerror(rc));
        d->jobs = NULL;
        return;
    }
    sl_jobs_start(d->jobs);
}

static void on_sandboxes_changed(void *arg)
{
    start_build(arg);
}

/* What the proxy of the Swarm node at `node` acknowledged and holds now: -1 when it is not
 * fed by any target, or its target is unreachable (swarm.h sl_swarm_proxy_acked_fn). */
static int64_t swarm_node_acked(void *arg, const char *node)
{
    struct daemon *d = arg;

    for (size_t i = 0; d->pusher != NULL && i < d->n_swarm_nodes; i++) {
        const struct swarm_node *n = &d->swarm_nodes[i];
        struct sl_pusher_target_status t;

        if (strcmp(n->node, node) != 0 || n->target < 0) {
            continue;
        }
        sl_pusher_target(d->pusher, (size_t)n->target, &t);
        return t.unreachable ? -1 : t.acked_version;
    }
    return -1;
}

static void on_acked(void *arg, int64_t version)
{
    struct daemon *d = arg;
    int64_t one = version;

    if (d->n_swarm_nodes > 0) {
        /* A create waits for one node's proxy; the launcher places it on such a node. */
        one = 0;
        for (size_t i = 0; i < d->n_swarm_nodes; i++) {
            int64_t v = swarm_node_acked(d, d->swarm_nodes[i].node);

            one = v > one ? v : one;
        }
    }
    if (d->sandboxes != NULL) {
        sl_sandboxes_acked(d->sandboxes, version, one);
    }
    check_waits(d);
}

/* Sandboxes need a proxy to push to: one on this host's admin socket, or for the Swarm
 * launcher the nodes' proxies at their admin URLs too. */
static bool sandboxes_asked(const struct sl_control_config *cfg)
{
    return cfg->n_proxy_admin_sockets > 0
           || (cfg->launcher == SL_CONTROL_LAUNCHER_SWARM && cfg->n_proxy_admin_urls > 0);
}

/* The problems of `all` (owned_problems()) that `user` (a name; the caller) may see: those of
 * global environments and of their own. A user's environments are private, also to admins:
 * the others are left out, not even counted. Without their "owner". */
static json_t *visible_problems(const json_t *all, const char *user)
{
    json_t *out = json_array();
    json_t *item;
    size_t i;

    json_array_foreach(all, i, item)
    {
        const json_t *owner = json_object_get(item, "owner");
        json_t *copy;

        if (owner != NULL && (user == NULL || strcmp(json_string_value(owner), user) != 0)) {
            continue;
        }
        copy = json_copy(item);
        if (copy == NULL || out == NULL) {
            json_decref(copy);
            json_decref(out);
            return NULL;
        }
        (void)json_object_del(copy, "owner");
        if (json_array_append_new(out, copy) < 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static void on_api_status(void *arg, json_t *doc)
{
    struct daemon *d = arg;
    json_t *proxies;
    json_t *problems;
    json_t *snap;
    bool audit_ok = true;

    if (d->sandboxes != NULL) {
        sl_sandboxes_status(d->sandboxes, doc);
    } else if (sandboxes_asked(d->cfg)) {
        /* Asked for, but setting them up failed: say why, as the log did. */
        (void)json_object_set_new(
                doc, "sandboxes",
                json_pack("{s:b, s:s+}", "ready", 0, "error", "sandboxes are off: ",
                          d->sandboxes_error[0] != '\0' ? d->sandboxes_error : "see the log"));
    } else {
        (void)json_object_set_new(doc, "sandboxes",
                                  json_pack("{s:b, s:s}", "ready", 0, "error",
                                            "sandboxes are off: no --proxy-admin-socket"));
    }

    if (d->pusher == NULL) {
        (void)json_object_set_new(doc, "snapshot", json_null());
        return;
    }
    proxies = json_array();
    for (size_t i = 0; proxies != NULL && i < sl_pusher_targets(d->pusher); i++) {
        struct sl_pusher_target_status t;
        json_t *audit = NULL;

        sl_pusher_target(d->pusher, i, &t);
        /* docs/reference/api.md §5.7: the proxy's audit alarm, as its last status said. */
        if (t.audit_healthy >= 0) {
            audit = json_pack("{s:b,s:s}", "healthy", t.audit_healthy, "error",
                              t.audit_error != NULL ? t.audit_error : "");
            audit_ok = audit_ok && t.audit_healthy == 1;
        }
        /* A socket target keeps its "socket" key; a URL target has "url" instead. */
        (void)json_array_append_new(
                proxies,
                json_pack("{s:s,s:I,s:b,s:s,s:o*}", t.socket != NULL ? "socket" : "url",
                          t.socket != NULL ? t.socket : t.url, "acknowledged_version",
                          (json_int_t)t.acked_version, "unreachable", t.unreachable, "last_error",
                          t.last_error != NULL ? t.last_error : "", "audit", audit));
    }
    /* "o": the document takes this new list. */
    problems = visible_problems(d->problems, json_string_value(json_object_get(doc, "user")));
    snap = json_pack("{s:I,s:s?,s:I,s:I,s:s?,s:o*,s:o*}", "version",
                     (json_int_t)sl_pusher_version(d->pusher), "built_at",
                     d->built_at[0] != '\0' ? d->built_at : NULL, "bytes",
                     (json_int_t)d->built_bytes, "build_us", (json_int_t)(d->built_ns / 1000u),
                     "build_error", d->build_error[0] != '\0' ? d->build_error : NULL, "problems",
                     problems, "proxies", proxies);
    (void)json_object_set_new(doc, "snapshot", snap != NULL ? snap : json_null());
    (void)json_object_set_new(doc, "audit_healthy", json_boolean(audit_ok));
}

/* GET /readyz (docs/reference/api.md §5.7): the database is open (it is, while the daemon
 * runs), every proxy acknowledged the newest snapshot, and the sandboxes are up when they
 * were asked for and their engine is there: a Docker daemon installed here, or with the Swarm
 * launcher always (this host's socket plays no part). */
static bool on_api_ready(void *arg, json_t *doc)
{
    struct daemon *d = arg;
    const char *docker = d->cfg->docker_socket;
    json_t *sb = json_object();
    json_t *why = json_array();
    bool ready = true;
    bool swarm = d->cfg->launcher == SL_CONTROL_LAUNCHER_SWARM;
    struct stat st;

    (void)json_object_set_new(doc, "store", json_string("open"));
    if (d->pusher == NULL) {
        (void)json_object_set_new(doc, "snapshot", json_string("not needed"));
    } else {
        int64_t version = sl_pusher_version(d->pusher);
        int64_t acked = sl_pusher_acked_by_all(d->pusher);

        (void)json_object_set_new(doc, "snapshot",
                                  json_pack("{s:I,s:I}", "version", (json_int_t)version,
                                            "acknowledged_by_all", (json_int_t)acked));
        if (version == 0 || acked < version) {
            ready = false;
            (void)json_array_append_new(
                    why, json_string(version == 0 ? "no snapshot built yet"
                                                  : "a proxy has not acknowledged the newest "
                                                    "snapshot"));
        }
    }
    if (!sandboxes_asked(d->cfg) || (!swarm && (docker == NULL || stat(docker, &st) != 0))) {
        /* No sandboxes asked for, or no Docker daemon installed here: the rest works. */
        (void)json_object_set_new(doc, "docker", json_string("not needed"));
    } else if (d->sandboxes != NULL && sb != NULL) {
        sl_sandboxes_status(d->sandboxes, sb);
        (void)json_object_set(doc, "docker", json_object_get(sb, "sandboxes"));
        if (!json_is_true(json_object_get(json_object_get(sb, "sandboxes"), "ready"))) {
            ready = false;
            (void)json_array_append_new(why, json_string("sandboxes are not ready"));
        }
    } else {
        ready = false;
        (void)json_object_set_new(doc, "docker",
                                  json_pack("{s:b,s:s}", "ready", 0, "error", d->sandboxes_error));
        (void)json_array_append_new(why, json_string(swarm ? "sandboxes are off: the Swarm "
                                                             "launcher did not start"
                                                           : "sandboxes are off though a Docker "
                                                             "daemon is installed"));
    }
    json_decref(sb);
    if (!ready) {
        (void)json_object_set_new(doc, "not_ready", why);
    } else {
        json_decref(why);
    }
    return ready;
}

static void on_sandboxes_closed(void *arg)
{
    struct daemon *d = arg;

    d->sandboxes = NULL;
    d->api.sandboxes = NULL;
    d->launcher = NULL;
    if (d->pusher != NULL) {
        sl_pusher_close(d->pusher, NULL, NULL);
        d->pusher = NULL;
    }
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct daemon *d = h->data;

    if (signum == SIGUSR1 || signum == SIGHUP) {
        /* Log rotation and reload (docs/reference/cli.md §1.4): the control plane logs to standard
         * error, keeps no file open and reads its flags once, so there is nothing to reopen or
         * reload; neither signal may end it (sluice up passes both on to its children). */
        sl_log(SL_LOG_INFO, 0, "msg=\"%s: nothing to do (the log is standard error)\"",
               signum == SIGUSR1 ? "SIGUSR1" : "SIGHUP");
        return;
    }
    if (d->stopping) {
        return;
    }
    d->stopping = true;
    sl_log(SL_LOG_INFO, 0, "msg=\"stopping\" signal=%s pending=%zu",
           signum == SIGTERM ? "SIGTERM" : "SIGINT", sl_api_pending(&d->api));
    while (d->waits != NULL) {
        end_wait(&d->waits, "the control plane is stopping");
    }
    if (d->wait_timer_open) {
        d->wait_timer_open = false;
        uv_close((uv_handle_t *)&d->wait_timer, NULL);
    }
    if (d->observe_timer_open) {
        d->observe_timer_open = false;
        uv_close((uv_handle_t *)&d->observe_timer, NULL);
    }
    /* Requests the handlers hold are still answered (Connection: close), for up to
     * STOP_GRACE_MS; what the stop ends below (waits, sandbox creates and calls) answers with
     * its reason. The loop ends once the last job and handle are done. */
    sl_http_server_drain(d->server, STOP_GRACE_MS, NULL, NULL);
    d->server = NULL;
    /* Before the sandboxes close: jobs in flight stop where they are (docs/jobs.md). */
    sl_jobs_stop(d->jobs);
    if (d->sandboxes != NULL) {
        /* Containers go first; the pusher stays until they are gone (their entries leave the
         * proxies' snapshot), see on_sandboxes_closed. */
        sl_sandboxes_close(d->sandboxes, on_sandboxes_closed, d);
    } else if (d->pusher != NULL) {
        sl_pusher_close(d->pusher, NULL, NULL);
        d->pusher = NULL;
    }
    uv_close((uv_handle_t *)&d->sig_term, NULL);
    uv_close((uv_handle_t *)&d->sig_int, NULL);
    uv_close((uv_handle_t *)&d->sig_usr1, NULL);
    uv_close((uv_handle_t *)&d->sig_hup, NULL);
    /* Closing the handles gave both signals their default action (the end of the process). */
    (void)signal(SIGUSR1, SIG_IGN);
    (void)signal(SIGHUP, SIG_IGN);
}

/* The containers' CA bundle: the system's CAs, then the sluice CA of the data directory. */
static int read_ca_bundle(const char *dir, struct sl_buf *out, char *err, size_t errlen)
{
    char path[PATH_BYTES];
    int rc = sl_file_read(SL_CONTROL_SYSTEM_CA_BUNDLE, out, err, errlen);

    if (rc == SL_ENOTFOUND) {
        sl_log(SL_LOG_WARN, 0,
               "msg=\"no system CA bundle; containers trust the sluice CA only\" "
               "path=%s",
               SL_CONTROL_SYSTEM_CA_BUNDLE);
        rc = 0;
    }
    if (rc == 0 && out->len > 0 && out->p[out->len - 1] != '\n') {
        rc = sl_buf_append(out, "\n", 1);
    }
    if (rc == 0 && snprintf(path, sizeof(path), "%s/ca.pem", dir) >= (int)sizeof(path)) {
        rc = SL_EINVAL;
    }
    if (rc == 0) {
        rc = sl_file_read(path, out, err, errlen);
        if (rc == SL_ENOTFOUND) {
            (void)snprintf(err, errlen,
                           "no CA in %s (the proxy's CA, which containers must trust): run "
                           "`sluice ca init --out %s` or `sluice up`",
                           dir, dir);
        }
    }
    return rc;
}

/* Writes the resolv.conf bound into containers: the proxy's DNS responder on the gateway
 * (docs/reference/containers.md §5.4), which answers every name with the gateway's own address
 * and forwards nothing; a lookup it does not answer fails within seconds. */
static int write_resolv_conf(const char *path, const char *gateway, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");

    if (f == NULL
        || fprintf(f,
                   "# sluice: names resolve to the gateway, where the proxy answers\n"
                   "nameserver %s\noptions timeout:1 attempts:2\n",
                   gateway)
                   < 0
        || fclose(f) != 0) {
        (void)snprintf(err, errlen, "cannot write %.300s: %s", path, strerror(errno));
        return SL_EIO;
    }
    (void)chmod(path, 0644);
    return 0;
}

/* The Docker launcher's part before the manager exists: the client of this host's daemon and
 * the resolv.conf containers get (its path in `resolv`, written once the gateway is known). */
static int docker_launcher(struct daemon *d, const struct sl_control_config *cfg,
                           struct sl_sandboxes_config *sc, char *resolv, size_t resolv_cap,
                           char *err, size_t errlen)
{
    char cwd[PATH_BYTES];
    char dir[PATH_BYTES * 2 + 2];
    int rc = 0;

    /* Docker binds host paths: the file's path must be absolute. */
    if (cfg->data_dir[0] != '/' && getcwd(cwd, sizeof(cwd)) == NULL) {
        (void)snprintf(err, errlen, "cannot tell the current directory: %s", strerror(errno));
        return SL_EIO;
    }
    if (snprintf(dir, sizeof(dir), "%s%s%s", cfg->data_dir[0] == '/' ? "" : cwd,
                 cfg->data_dir[0] == '/' ? "" : "/", cfg->data_dir)
                >= (int)sizeof(dir)
        || snprintf(resolv, resolv_cap, "%s/sandbox-resolv.conf", dir) >= (int)resolv_cap) {
        (void)snprintf(err, errlen, "the data directory's path is too long");
        return SL_EINVAL;
    }
    rc = sl_docker_launcher_create(&d->loop, cfg->docker_socket, &d->launcher);
    if (rc < 0) {
        (void)snprintf(err, errlen, "cannot create the Docker client: %s", sl_strerror(rc));
        return rc;
    }
    sc->resolv_conf = resolv;
    return 0;
}

/* The Docker launcher's part once the manager exists: the resolv.conf naming the proxy's DNS
 * responder on the gateway, and the host's table on the bridge (before any container exists:
 * from the bridge only sluice's ports are reachable). */
static int docker_host_network(struct daemon *d, const struct sl_control_config *cfg,
                               const char *resolv, char *err, size_t errlen)
{
    struct sl_firewall_config fw;
    int rc = write_resolv_conf(resolv, sl_sandboxes_gateway(d->sandboxes), err, errlen);

    if (rc < 0) {
        return rc;
    }
    sl_firewall_table_name(cfg->network, d->fw_table, sizeof(d->fw_table));
    fw.table = d->fw_table;
    fw.bridge = cfg->network;
    fw.gateway = sl_sandboxes_gateway(d->sandboxes);
    fw.proxy_port = cfg->proxy_port;
    fw.redirect_port = cfg->transparent_port;
    rc = sl_firewall_install(&fw, err, errlen);
    d->fw_installed = rc == 0;
    return rc;
}

/* The Swarm launcher (control/sandbox/swarm.h): the manager over TLS, a proxy per node whose
 * address the sandboxes of that node get (by name in their hosts file), their loss noticed by a
 * list every SWARM_RECONCILE_MS. None of the host pieces apply: the sandboxes run on other
 * hosts, whose own proxies answer them. */
#define SWARM_RECONCILE_MS 2000u

/* Copies HOST of the pusher target `url` (`https://HOST:PORT`, brackets dropped) to `out`. */
static void url_host(const char *url, char *out, size_t cap)
{
    const char *h = url != NULL && strncmp(url, "https://", 8) == 0 ? url + 8 : "";
    const char *colon = strrchr(h, ':');
    size_t n = colon != NULL ? (size_t)(colon - h) : strlen(h);

    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    (void)snprintf(out, cap, "%.*s", (int)n, h);
}

/* Which --proxy-admin-url feeds each node's proxy: the one whose host is the node's address
 * (the proxy's admin port published on its node) or the proxy's own address. A node without
 * one never gets a sandbox: nothing would tell that its proxy holds the sandbox's entry. */
static void swarm_map_targets(struct daemon *d, const struct sl_swarm_proxy *proxies, size_t n)
{
    d->n_swarm_nodes = 0;
    for (size_t i = 0; i < n && i < SL_CONTROL_SWARM_PROXIES_MAX; i++) {
        struct swarm_node *sn = &d->swarm_nodes[d->n_swarm_nodes++];

        (void)snprintf(sn->node, sizeof(sn->node), "%s", proxies[i].node);
        (void)snprintf(sn->proxy, sizeof(sn->proxy), "%s", proxies[i].proxy);
        sn->target = -1;
        for (size_t k = 0; d->pusher != NULL && k < sl_pusher_targets(d->pusher); k++) {
            struct sl_pusher_target_status t;
            char host[300];

            sl_pusher_target(d->pusher, k, &t);
            url_host(t.url, host, sizeof(host));
            if (strcmp(host, sn->node) == 0 || strcmp(host, sn->proxy) == 0) {
                sn->target = (int)k;
                break;
            }
        }
        if (sn->target < 0) {
            sl_log(SL_LOG_WARN, 0,
                   "msg=\"no --proxy-admin-url names this node or its proxy: no sandbox will be "
                   "placed on it\" node=%s proxy=%s",
                   sn->node, sn->proxy);
        }
    }
}

static int swarm_launcher(struct daemon *d, const struct sl_control_config *cfg,
                          struct sl_sandboxes_config *sc, char *err, size_t errlen)
{
    const struct sl_control_swarm *sw = &cfg->swarm;
    struct sl_swarm_proxy proxies[SL_CONTROL_SWARM_PROXIES_MAX];
    char text[SL_CONTROL_SWARM_PROXIES_MAX][2 * 16 + 2];
    struct sl_swarm_config c = {
        .manager = sw->manager,
        .port = (uint16_t)sw->port,
        .ca_file = sw->ca,
        .cert_file = sw->cert,
        .key_file = sw->key,
        .wall_image = sw->image,
        .encrypted = sw->encrypted,
        .proxies = proxies,
        .n_proxies = sw->n_proxies,
        .proxy_acked = swarm_node_acked,
        .proxy_acked_arg = d,
    };
    int rc;

    _Static_assert(SL_CONTROL_SWARM_PROXIES_MAX <= SL_SWARM_PROXIES_MAX, "--swarm-proxy fits");
    for (size_t i = 0; i < sw->n_proxies; i++) {
        char *eq;

        (void)snprintf(text[i], sizeof(text[i]), "%s", sw->proxies[i]);
        eq = strchr(text[i], '=');
        if (eq == NULL) {
            (void)snprintf(err, errlen, "--swarm-proxy %s: NODE=PROXY", sw->proxies[i]);
            return SL_EINVAL;
        }
        *eq = '\0';
        proxies[i] = (struct sl_swarm_proxy){ text[i], eq + 1 };
    }
    swarm_map_targets(d, proxies, sw->n_proxies);
    rc = sl_swarm_launcher_create(&d->loop, &c, &d->launcher);
    if (rc < 0) {
        (void)snprintf(err, errlen, "cannot create the Swarm client: %s", sl_strerror(rc));
        return rc;
    }
    sc->proxy_name = SL_CONTROL_SWARM_PROXY_NAME;
    sc->reconcile_ms = SWARM_RECONCILE_MS;
    return 0;
}

/* Sandboxes need a proxy to push to; everything else is checked here, and what fails is
 * reported rather than fatal: the API serves environments without containers. What is common
 * to every launcher is here; each launcher brings its own pieces (docker_launcher and
 * docker_host_network, swarm_launcher). */
static void setup_sandboxes(struct daemon *d, const struct sl_control_config *cfg)
{
    struct sl_sandboxes_config sc;
    struct sl_buf bundle;
    char resolv[PATH_BYTES * 2 + 32] = "";
    char api_url[300];
    char err[ERR_BYTES] = "";
    bool swarm = cfg->launcher == SL_CONTROL_LAUNCHER_SWARM;
    int rc;

    if (!sandboxes_asked(cfg)) {
        sl_log(SL_LOG_INFO, 0, "msg=\"sandboxes are off: no --proxy-admin-socket\"");
        return;
    }
    memset(&sc, 0, sizeof(sc));
    sl_buf_init(&bundle, 8u << 20);
    rc = read_ca_bundle(cfg->data_dir, &bundle, err, sizeof(err));
    if (rc == 0 && (cfg->git_url == NULL) != (cfg->git_token == NULL)) {
        rc = SL_EINVAL;
        (void)snprintf(err, sizeof(err), "--git-url and --git-token go together");
    }
    if (rc == 0 && cfg->git_url != NULL) {
        rc = sl_gitlocal_set_remote(d->git, cfg->git_url, cfg->git_token, err, sizeof(err));
    }
    if (rc == 0) {
        rc = swarm ? swarm_launcher(d, cfg, &sc, err, sizeof(err))
                   : docker_launcher(d, cfg, &sc, resolv, sizeof(resolv), err, sizeof(err));
    }
    if (rc == 0) {
        sc.loop = &d->loop;
        sc.launcher = d->launcher;
        sc.network = cfg->network;
        sc.subnet = cfg->subnet;
        sc.proxy_port = cfg->proxy_port;
        sc.redirect_port = cfg->transparent_port;
        sc.ca_bundle = bundle.p;
        sc.ca_bundle_len = bundle.len;
        /* SLUICE_API_URL: the control plane as people reach it, the REST API under /api/v1
         * and MCP at /mcp (a sandbox cannot reach it). */
        if (snprintf(api_url, sizeof(api_url), "http://%s", cfg->listen) < (int)sizeof(api_url)) {
            sc.api_url = api_url;
        }
        sc.runner = sl_runner_blob;
        sc.runner_len = sl_runner_blob_len;
        sc.git = d->git;
        sc.unacked = on_sandboxes_unacked;
        sc.unacked_arg = d;
        sc.idle_timeout_ms = (uint64_t)cfg->idle_timeout_s * 1000;
        sc.lifetime_ms = (uint64_t)cfg->sandbox_lifetime_s * 1000;
        sc.changed = on_sandboxes_changed;
        sc.changed_arg = d;
        rc = sl_sandboxes_create(&sc, &d->sandboxes, err, sizeof(err));
    }
    if (rc == 0 && !swarm) {
        rc = docker_host_network(d, cfg, resolv, err, sizeof(err));
    }
    sl_buf_finish(&bundle);
    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"sandboxes are off\" err=\"%s\"", err);
        (void)snprintf(d->sandboxes_error, sizeof(d->sandboxes_error), "%s", err);
        if (d->sandboxes != NULL) {
            /* Nothing started yet: closing only releases memory. */
            sl_sandboxes_close(d->sandboxes, NULL, NULL);
            d->sandboxes = NULL;
        } else if (d->launcher != NULL) {
            d->launcher->ops->close(d->launcher, NULL, NULL);
        }
        d->launcher = NULL;
        return;
    }
    d->api.sandboxes = d->sandboxes;
    sl_sandboxes_start(d->sandboxes);
}

static int serve(struct daemon *d, const struct sl_control_config *cfg)
{
    /* Bodies only from callers with a token that authenticates (docs/reference/api.md §5). */
    static const struct sl_http_server_config http = { .gate = sl_api_gate };
    char err[ERR_BYTES] = "";
    int rc;

    rc = sl_http_server_create(&d->loop, &http, sl_api_handle, &d->api, &d->server);
    if (rc < 0) {
        sl_eprintf("control: cannot create the HTTP server: %s", sl_strerror(rc));
        return rc;
    }
    rc = sl_http_server_listen_tcp(d->server, cfg->listen, err, sizeof(err));
    if (rc < 0) {
        sl_eprintf("control: --listen %s: %s", cfg->listen, err);
    }
    if (rc == 0 && cfg->n_proxy_admin_urls > 0) {
        const struct sl_http_tls_files files = {
            .cert = cfg->proxy_admin_cert,
            .key = cfg->proxy_admin_key,
            .ca = cfg->proxy_admin_ca,
            .crl = cfg->proxy_admin_crl,
            .peer_kind = "proxy",
        };

        rc = sl_http_tls_create(&files, false, &d->push_tls, err, sizeof(err));
        if (rc < 0) {
            sl_eprintf("control: --proxy-admin-url: %s", err);
        }
    }
    if (rc == 0 && cfg->n_proxy_admin_sockets + cfg->n_proxy_admin_urls > 0) {
        struct sl_pusher_config pc = { .sockets = cfg->proxy_admin_sockets,
                                       .n_sockets = cfg->n_proxy_admin_sockets,
                                       .on_acked = on_acked,
                                       .acked_arg = d,
                                       .urls = cfg->proxy_admin_urls,
                                       .n_urls = cfg->n_proxy_admin_urls,
                                       .tls = d->push_tls };

        rc = sl_pusher_create(&d->loop, &pc, &d->pusher, err, sizeof(err));
        if (rc < 0) {
            sl_eprintf("control: cannot start the snapshot pusher: %s", err);
        }
    }
    if (rc < 0) {
        sl_http_server_close(d->server, NULL, NULL);
        d->server = NULL;
        (void)uv_run(&d->loop, UV_RUN_DEFAULT);
        sl_http_tls_free(d->push_tls);
        return rc;
    }
    SL_BUG_ON(uv_signal_init(&d->loop, &d->sig_term) != 0);
    SL_BUG_ON(uv_signal_init(&d->loop, &d->sig_int) != 0);
    SL_BUG_ON(uv_timer_init(&d->loop, &d->wait_timer) != 0);
    d->wait_timer.data = d;
    d->wait_timer_open = true;
    SL_BUG_ON(uv_timer_init(&d->loop, &d->observe_timer) != 0);
    d->observe_timer.data = d;
    d->observe_timer_open = true;
    SL_BUG_ON(uv_signal_init(&d->loop, &d->sig_usr1) != 0);
    SL_BUG_ON(uv_signal_init(&d->loop, &d->sig_hup) != 0);
    d->sig_term.data = d;
    d->sig_int.data = d;
    d->sig_usr1.data = d;
    d->sig_hup.data = d;
    (void)uv_signal_start(&d->sig_term, on_signal, SIGTERM);
    (void)uv_signal_start(&d->sig_int, on_signal, SIGINT);
    (void)uv_signal_start(&d->sig_usr1, on_signal, SIGUSR1);
    (void)uv_signal_start(&d->sig_hup, on_signal, SIGHUP);
    sl_log(SL_LOG_INFO, 0, "msg=\"control plane listening\" listen=%s data=%s", cfg->listen,
           cfg->data_dir);
    setup_sandboxes(d, cfg);
    setup_jobs(d, cfg);
    start_build(d);
    (void)uv_run(&d->loop, UV_RUN_DEFAULT);
    /* The pusher, which borrowed it, is gone with the loop's last handles. */
    sl_http_tls_free(d->push_tls);
    d->push_tls = NULL;
    sl_jobs_destroy(d->jobs);
    d->jobs = NULL;
    /* Every container of the network is gone by now (sl_sandboxes_close). */
    if (d->fw_installed && sl_firewall_remove(d->fw_table, err, sizeof(err)) < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot remove the firewall table\" table=%s err=\"%s\"",
               d->fw_table, err);
    }
    return 0;
}

int sl_control_run(const struct sl_control_config *cfg)
{
    struct daemon d;
    struct sl_secrets *secrets = NULL;
    struct sl_store *store = NULL;
    char path[PATH_BYTES];
    char audit[PATH_BYTES];
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
    rc = sl_gitlocal_create(store, &d.git);
    if (rc < 0) {
        sl_eprintf("control: cannot set up the git platform: %s", sl_strerror(rc));
        goto out_store;
    }
    rc = uv_loop_init(&d.loop);
    if (rc < 0) {
        sl_eprintf("control: cannot start the event loop: %s", uv_strerror(rc));
        goto out_git;
    }
    d.api.loop = &d.loop;
    d.api.store = store;
    d.api.secrets = secrets;
    d.api.git = d.git;
    d.api.default_image = cfg->image;
    if (cfg->audit_log != NULL) {
        d.api.audit_log = cfg->audit_log;
    } else if (snprintf(audit, sizeof(audit), "%s/audit.log", cfg->data_dir) < (int)sizeof(audit)) {
        d.api.audit_log = audit;
    }
    d.api.changed = on_api_changed;
    d.api.status = on_api_status;
    d.api.revoked = on_api_revoked;
    d.api.ready = on_api_ready;
    d.cfg = cfg;
    d.api.jobs_queued = on_jobs_queued;
    d.api.hook_arg = &d;
    sl_api_init(&d.api);
    rc = serve(&d, cfg);
    SL_BUG_ON(sl_api_pending(&d.api) != 0);
    if (uv_loop_close(&d.loop) != 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"the loop still had handles at exit\"");
    }
    sl_log(SL_LOG_INFO, 0, "msg=\"stopped\"");
    json_decref(d.problems);
out_git:
    d.git->ops->destroy(d.git);
out_store:
    sl_store_close(store);
out_secrets:
    sl_secrets_destroy(secrets);
    return rc;
}
