/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/sandbox.c - the sandbox manager (see sandbox.h): the registry, waiting for the
 * proxies, removal, the sweep, the snapshot client entries and their refresh from the git
 * platform, the ports of the inner walls, start, status and close, and the manager's creation.
 * Opening a sandbox is sandbox_open.c, the calls into one sandbox_calls.c.
 */
#include "control/sandbox/sandbox.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/slice.h"
#include "control/sandbox/sandbox_int.h"

#define CLOSE_WAIT_MS 5000u
#define SWEEP_MS      1000u

/* ---- small helpers ------------------------------------------------------------------------ */

void sl__sandbox_free_strv(char **v, size_t n, bool wipe)
{
    for (size_t i = 0; v != NULL && i < n; i++) {
        if (wipe && v[i] != NULL) {
            sodium_memzero(v[i], strlen(v[i]));
        }
        sl_free(v[i]);
    }
    sl_free(v);
}

void sl_sandbox_spec_free(struct sl_sandbox_spec *spec)
{
    if (spec == NULL) {
        return;
    }
    sl_free(spec->owner_id);
    sl_free(spec->owner_name);
    sl_free(spec->owner_email);
    sl_gitplat_credential_finish(&spec->git_cred);
    sl_free(spec->repo);
    sl_free(spec->ref);
    sl_free(spec->env_id);
    sl_free(spec->env_name);
    sl_free(spec->image);
    sl_free(spec->registry_username);
    if (spec->registry_password != NULL) {
        sodium_memzero(spec->registry_password, strlen(spec->registry_password));
        sl_free(spec->registry_password);
    }
    sl__sandbox_free_strv(spec->env, spec->n_env, true);
    sl__sandbox_free_strv(spec->secrets, spec->n_secrets, true);
    sl__sandbox_free_strv(spec->placeholder_envs, spec->n_placeholder_envs, false);
    sl_free(spec);
}

json_t *sl__sandbox_message(const char *key, const char *text)
{
    json_t *o = json_object();

    if (o != NULL) {
        (void)json_object_set_new(o, key, json_string(text));
    }
    return o;
}

const struct sl_gitplat_remote *sl__sandbox_remote(const struct sl_sandboxes *sb)
{
    return sb->cfg.git != NULL ? sb->cfg.git->remote : NULL;
}

void sl__sandbox_reply_msg(sl_sandbox_reply_fn *reply, void *arg, int status, const char *text)
{
    reply(arg, status, sl__sandbox_message("message", text));
}

void sl__sandbox_reply_err(sl_sandbox_reply_fn *reply, void *arg, int status, const char *text)
{
    reply(arg, status, sl__sandbox_message("error", text));
}

void sl__sandbox_rfc3339(int64_t unix_s, char *out, size_t cap)
{
    time_t t = (time_t)unix_s;
    struct tm tm;

    if (gmtime_r(&t, &tm) == NULL || strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        (void)snprintf(out, cap, "1970-01-01T00:00:00Z");
    }
}

/* ---- registry ----------------------------------------------------------------------------- */

struct sl__sandbox *sl__sandbox_find(const struct sl_sandboxes *sb, const char *id)
{
    for (struct sl__sandbox *s = sb->list; s != NULL; s = s->next) {
        if (strcmp(s->id, id) == 0 && s->state != SL__SANDBOX_GONE) {
            return s;
        }
    }
    return NULL;
}

void sl__sandbox_unref(struct sl__sandbox *s)
{
    if (--s->refs > 0) {
        return;
    }
    sodium_memzero(s->token, sizeof(s->token));
    sl_gitplat_credential_finish(&s->cred);
    sl_free(s->owner_id);
    sl_free(s->repo);
    sl_free(s->ref);
    sl_free(s->env_id);
    sl_free(s->env_name);
    sl_free(s->container);
    sl_free(s->clone_error);
    SL_BUG_ON(s->parked != NULL);
    sl__sandbox_free_strv(s->secrets, s->n_secrets, true);
    sl__sandbox_free_strv(s->ph_env, s->n_placeholders, false);
    sl__sandbox_free_strv(s->ph_value, s->n_placeholders, false);
    sl_sandbox_spec_free(s->spec);
    sl_free(s);
}

static void unlink_sandbox(struct sl_sandboxes *sb, struct sl__sandbox *s)
{
    size_t slot = (size_t)(sb->n_recent++ % SL_SANDBOX_RECENT);

    (void)snprintf(sb->recent[slot].id, sizeof(sb->recent[slot].id), "%s", s->id);
    (void)snprintf(sb->recent[slot].owner_id, sizeof(sb->recent[slot].owner_id), "%s",
                   s->owner_id != NULL ? s->owner_id : "");
    for (struct sl__sandbox **pp = &sb->list; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            s->next = NULL;
            return;
        }
    }
}

void sl__sandbox_changed(struct sl_sandboxes *sb)
{
    sb->generation++;
    if (sb->cfg.changed != NULL && !sb->closing) {
        sb->cfg.changed(sb->cfg.changed_arg);
    }
}

/* ---- waiting for the proxies -------------------------------------------------------------- */

static void waiter_fire(struct sl_sandboxes *sb, struct sl__sandbox_waiter *w, bool acked)
{
    for (struct sl__sandbox_waiter **pp = &sb->waiters; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    w->linked = false;
    w->next = NULL;
    w->done(w, acked);
}

static void check_waiters(struct sl_sandboxes *sb)
{
    bool again = true;

    while (again) {
        again = false;
        for (struct sl__sandbox_waiter *w = sb->waiters; w != NULL; w = w->next) {
            if (w->version == 0 && sb->built_gen >= w->gen && sb->built_version > 0) {
                w->version = sb->built_version;
            }
            if (w->version != 0 && (w->one ? sb->acked_one : sb->acked) >= w->version) {
                waiter_fire(sb, w, true);
                again = true;
                break;
            }
        }
    }
}

/* Waits for the current generation (call after sl__sandbox_changed()). */
void sl__sandbox_wait_for_proxies(struct sl_sandboxes *sb, struct sl__sandbox_waiter *w, bool one,
                                  uint64_t timeout_ms,
                                  void (*done)(struct sl__sandbox_waiter *w, bool acked))
{
    w->gen = sb->generation;
    w->version = 0;
    w->one = one;
    w->deadline = uv_now(sb->cfg.loop) + timeout_ms;
    w->done = done;
    w->linked = true;
    w->next = sb->waiters;
    sb->waiters = w;
    check_waiters(sb);
}

void sl_sandboxes_built(struct sl_sandboxes *sb, uint64_t generation, int64_t version)
{
    if (generation >= sb->built_gen) {
        sb->built_gen = generation;
        sb->built_version = version;
    }
    check_waiters(sb);
}

void sl_sandboxes_acked(struct sl_sandboxes *sb, int64_t by_all, int64_t by_one)
{
    sb->acked = by_all;
    sb->acked_one = by_one;
    check_waiters(sb);
}

/* ---- the inner walls' ports ----------------------------------------------------------------- */

static bool has_port(const uint8_t *ports, unsigned p)
{
    return (ports[p / 8] & (1u << (p % 8))) != 0;
}

int sl__sandbox_egress_init(const struct sl_sandboxes *sb, struct sl__sandbox_egress *out)
{
    const unsigned own[] = { sb->cfg.proxy_port, sb->cfg.redirect_port, SL_SANDBOX_DNS_PORT,
                             SL_SANDBOX_HTTP_PORT, SL_SANDBOX_HTTPS_PORT };
    size_t n = SL_ARRAY_LEN(own);

    memset(out, 0, sizeof(*out));
    for (unsigned p = 1; p < 65536u; p++) {
        n += has_port(sb->named_ports, p);
    }
    out->tcp = sl_calloc(n, sizeof(*out->tcp));
    if (out->tcp == NULL) {
        return SL_ENOMEM;
    }
    n = 0;
    for (size_t i = 0; i < SL_ARRAY_LEN(own); i++) {
        out->tcp[n++] = (uint16_t)own[i];
    }
    for (unsigned p = 1; p < 65536u; p++) {
        if (has_port(sb->named_ports, p)) {
            out->tcp[n++] = (uint16_t)p;
        }
    }
    out->udp[0] = SL_SANDBOX_DNS_PORT;
    out->e = (struct sl_launcher_egress){
        .address = sb->gateway,
        .tcp_ports = out->tcp,
        .n_tcp_ports = n,
        .udp_ports = out->udp,
        .n_udp_ports = SL_ARRAY_LEN(out->udp),
    };
    return 0;
}

void sl__sandbox_egress_finish(struct sl__sandbox_egress *e)
{
    sl_free(e->tcp);
    memset(e, 0, sizeof(*e));
}

static void on_wall_synced(void *arg, int rc, const char *err)
{
    struct sl__sandbox *s = arg;

    s->wall_busy = false;
    if (rc < 0 && s->state != SL__SANDBOX_GONE) {
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"the sandbox's inner wall could not take the ports the rules name now: it "
               "keeps its old wall, so the new ports stay closed to it\" sandbox=%s err=\"%s\"",
               s->id, err != NULL ? err : sl_strerror(rc));
    }
    /* Tried: the next change of the ports tries again, not this failure in a loop. */
    s->wall_gen = s->wall_sending;
    sl__sandbox_sync_wall(s);
    sl__sandbox_unref(s);
}

void sl__sandbox_sync_wall(struct sl__sandbox *s)
{
    struct sl_sandboxes *sb = s->sb;
    struct sl__sandbox_egress eg;

    if (s->wall_busy || s->container == NULL || s->wall_gen == sb->ports_gen || sb->closing
        || (s->state != SL__SANDBOX_STARTING && s->state != SL__SANDBOX_READY)) {
        return;
    }
    if (sl__sandbox_egress_init(sb, &eg) < 0) {
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"out of memory updating a sandbox's inner wall: it keeps its old wall\" "
               "sandbox=%s",
               s->id);
        return;
    }
    s->wall_busy = true;
    s->wall_sending = sb->ports_gen;
    s->refs++;
    sb->cfg.launcher->ops->set_egress(sb->cfg.launcher, s->container, &eg.e, on_wall_synced, s);
    sl__sandbox_egress_finish(&eg);
}

void sl_sandboxes_set_named_ports(struct sl_sandboxes *sb, const uint8_t *ports)
{
    if (memcmp(sb->named_ports, ports, sizeof(sb->named_ports)) == 0) {
        return;
    }
    memcpy(sb->named_ports, ports, sizeof(sb->named_ports));
    sb->ports_gen++;
    sl_log(SL_LOG_INFO, 0, "msg=\"the ports the rules name changed: updating the inner walls\"");
    for (struct sl__sandbox *s = sb->list; s != NULL; s = s->next) {
        sl__sandbox_sync_wall(s);
    }
}

/* ---- removal ------------------------------------------------------------------------------ */

struct removal {
    struct sl_sandboxes *sb;
    struct sl__sandbox *s;
    sl_sandbox_reply_fn *reply;
    void *arg;
    /* The answer to give once the container is gone, instead of 204 (a failed create's); the
     * removal's own failure is then only logged. */
    int status;
    json_t *body;
    struct sl__sandbox_waiter wait;
    bool removed;
    bool acked;
    int pending;
    char err[200];
};

/* The answer of a close that a proxy did not acknowledge in time. */
static void reply_unacked(struct removal *r)
{
    char who[400] = "";
    char text[512];

    if (r->sb->cfg.unacked != NULL) {
        r->sb->cfg.unacked(r->sb->cfg.unacked_arg, r->wait.version, who, sizeof(who));
    }
    (void)snprintf(text, sizeof(text), "the sandbox is closed, but %s",
                   who[0] != '\0' ? who
                                  : "a proxy has not acknowledged a snapshot without it within "
                                    "5 s");
    sl__sandbox_reply_msg(r->reply, r->arg, 503, text);
}

static void removal_step(struct removal *r)
{
    struct sl_sandboxes *sb = r->sb;

    if (--r->pending > 0) {
        return;
    }
    if (r->reply == NULL) {
        json_decref(r->body);
    } else if (r->status != 0) {
        r->reply(r->arg, r->status, r->body);
    } else if (!r->removed) {
        sl__sandbox_reply_msg(r->reply, r->arg, 502, r->err);
    } else if (!r->acked) {
        reply_unacked(r);
    } else {
        r->reply(r->arg, 204, json_null());
    }
    sl__sandbox_unref(r->s);
    sl_free(r);
    sb->pending_removes--;
    sl__sandboxes_maybe_closed(sb);
}

static void on_removed(void *arg, int rc, const char *err)
{
    struct removal *r = arg;

    r->removed = rc == 0;
    if (rc < 0) {
        (void)snprintf(r->err, sizeof(r->err), "the container could not be removed: %s",
                       err != NULL ? err : sl_strerror(rc));
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot remove a sandbox container\" sandbox=%s err=\"%s\"",
               r->s->id, err != NULL ? err : sl_strerror(rc));
    }
    removal_step(r);
}

static void on_removal_acked(struct sl__sandbox_waiter *w, bool acked)
{
    struct removal *r = SL_CONTAINER_OF(w, struct removal, wait);

    r->acked = acked;
    if (!acked) {
        sl_log(SL_LOG_WARN, 0,
               "msg=\"a proxy has not acknowledged a closed sandbox's removal yet\" sandbox=%s",
               r->s->id);
    }
    removal_step(r);
}

/* Takes `s` out: its entry leaves the snapshot and its container is removed. `reply` (may be
 * NULL) gets `body` with `status` once the container is gone, or, when `body` is NULL, 204 once
 * both happened (the proxies' acknowledgement is awaited up to 5 s). Takes `body`. */
void sl__sandbox_remove_with(struct sl__sandbox *s, const char *why, sl_sandbox_reply_fn *reply,
                             void *arg, int status, json_t *body)
{
    struct sl_sandboxes *sb = s->sb;
    struct removal *r = sl_calloc(1, sizeof(*r));

    SL_BUG_ON(s->state == SL__SANDBOX_GONE);
    sl_log(SL_LOG_INFO, 0, "msg=\"sandbox closed\" sandbox=%s repo=%s why=\"%s\"", s->id, s->repo,
           why);
    s->state = SL__SANDBOX_GONE;
    unlink_sandbox(sb, s);
    sl__sandbox_changed(sb);
    if (s->cred.value != NULL && sb->cfg.git != NULL) {
        sb->cfg.git->ops->revoke(sb->cfg.git, &s->cred);
    }
    if (r == NULL) {
        /* The entry is gone from the next snapshot; the container stays until a restart. */
        sl_log(SL_LOG_ERROR, 0, "msg=\"out of memory removing a sandbox\" sandbox=%s", s->id);
        if (reply == NULL) {
            json_decref(body);
        } else if (status != 0) {
            reply(arg, status, body);
        } else if (reply != NULL) {
            sl__sandbox_reply_msg(reply, arg, 503, "out of memory");
        }
        sl__sandbox_unref(s);
        return;
    }
    r->sb = sb;
    r->s = s;
    r->reply = reply;
    r->arg = arg;
    r->status = status;
    r->body = body;
    r->removed = true;
    r->acked = true;
    r->pending = 1;
    sb->pending_removes++;
    if (s->container != NULL) {
        r->pending++;
        sb->cfg.launcher->ops->remove(sb->cfg.launcher, s->container, on_removed, r);
    }
    if (reply != NULL && status == 0 && !sb->closing) {
        r->pending++;
        sl__sandbox_wait_for_proxies(sb, &r->wait, false, CLOSE_WAIT_MS, on_removal_acked);
    }
    removal_step(r);
}

void sl__sandbox_remove(struct sl__sandbox *s, const char *why, sl_sandbox_reply_fn *reply,
                        void *arg)
{
    sl__sandbox_remove_with(s, why, reply, arg, 0, NULL);
}

/* The clone's state for a list: null without a git platform. */
static json_t *clone_json(const struct sl__sandbox *s)
{
    switch (s->clone) {
    case SL__SANDBOX_CLONE_NONE:
        /* Before the container runs there is nothing to clone yet. */
        return s->state == SL__SANDBOX_STARTING && sl__sandbox_remote(s->sb) != NULL
                       ? json_string("pending")
                       : json_null();
    case SL__SANDBOX_CLONE_RUNNING:
        return json_string("cloning");
    case SL__SANDBOX_CLONE_DONE:
        return json_string("done");
    case SL__SANDBOX_CLONE_FAILED:
        return json_string("failed");
    }
    return json_null();
}

/* One sandbox as the lists show it. */
static json_t *list_item(const struct sl__sandbox *s)
{
    char created[32];
    char expires[32];
    json_t *item;

    sl__sandbox_rfc3339(s->created_unix, created, sizeof(created));
    sl__sandbox_rfc3339(s->expires_unix, expires, sizeof(expires));
    item = json_pack("{s:s, s:s, s:s?, s:s?, s:s, s:o, s:s, s:s}", "id", s->id, "repo", s->repo,
                     "ref", s->ref, "environment", s->env_name, "status",
                     s->state == SL__SANDBOX_READY ? "ready"
                     : s->pulling                  ? "pulling"
                                                   : "starting",
                     "clone", clone_json(s), "created_at", created, "expires_at", expires);
    if (item != NULL && s->pulling && s->spec != NULL
        && json_object_set_new(item, "pull",
                               json_pack("{s:s, s:I, s:I, s:I, s:I}", "image", s->spec->image,
                                         "layers", (json_int_t)s->pull.layers, "layers_done",
                                         (json_int_t)s->pull.layers_done, "bytes",
                                         (json_int_t)s->pull.bytes_done, "bytes_total",
                                         (json_int_t)s->pull.bytes_total))
                   < 0) {
        json_decref(item);
        item = NULL;
    }
    if (item != NULL && s->clone == SL__SANDBOX_CLONE_FAILED && s->clone_error != NULL
        && json_object_set_new(item, "clone_error", json_string(s->clone_error)) < 0) {
        json_decref(item);
        item = NULL;
    }
    return item;
}

json_t *sl_sandboxes_list(const struct sl_sandboxes *sb, const struct sl_sandbox_caller *caller,
                          const char *repo)
{
    json_t *arr = json_array();

    for (const struct sl__sandbox *s = sb->list; arr != NULL && s != NULL; s = s->next) {
        json_t *item;

        if (s->state == SL__SANDBOX_GONE || (repo != NULL && strcmp(s->repo, repo) != 0)
            || strcmp(s->owner_id, caller->user_id) != 0) {
            continue;
        }
        item = list_item(s);
        if (item == NULL || json_array_append_new(arr, item) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    return arr;
}

json_t *sl_sandboxes_owners(const struct sl_sandboxes *sb)
{
    json_t *ids = json_object();
    uint64_t n = sb->n_recent < SL_SANDBOX_RECENT ? sb->n_recent : SL_SANDBOX_RECENT;

    /* Closed ones first: an id reused by an open sandbox (never, ids are random) would take
     * the open one's owner. */
    for (uint64_t i = 0; ids != NULL && i < n; i++) {
        if (json_object_set_new(ids, sb->recent[i].id, json_string(sb->recent[i].owner_id)) < 0) {
            json_decref(ids);
            ids = NULL;
        }
    }
    for (const struct sl__sandbox *s = sb->list; ids != NULL && s != NULL; s = s->next) {
        if (s->owner_id != NULL && json_object_set_new(ids, s->id, json_string(s->owner_id)) < 0) {
            json_decref(ids);
            ids = NULL;
        }
    }
    return ids;
}

bool sl_sandboxes_is_token(const struct sl_sandboxes *sb, const char *token)
{
    size_t n = strlen(token);
    bool hit = false;

    for (const struct sl__sandbox *s = sb->list; s != NULL; s = s->next) {
        if (strlen(s->token) == n && sodium_memcmp(s->token, token, n) == 0) {
            hit = true;
        }
    }
    return hit;
}

/* ---- the reconciliation ------------------------------------------------------------------- */

static bool entry_runs(const struct sl_launcher_entry *entries, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++) {
        if (entries[i].running && strcmp(entries[i].id, id) == 0) {
            return true;
        }
    }
    return false;
}

static void on_reconciled(void *arg, int rc, const char *err,
                          const struct sl_launcher_entry *entries, size_t n)
{
    struct sl_sandboxes *sb = arg;
    bool again = true;

    sb->reconciling = false;
    if (rc < 0) {
        if (rc != SL_ECANCELED) {
            sl_log(SL_LOG_WARN, 0, "msg=\"cannot list the sandbox containers\" err=\"%s\"",
                   err != NULL ? err : sl_strerror(rc));
        }
        return;
    }
    while (again && !sb->closing) {
        again = false;
        for (struct sl__sandbox *s = sb->list; s != NULL; s = s->next) {
            /* A container reported after the list was asked for may not be in it yet. */
            if (s->state != SL__SANDBOX_READY || s->busy > 0 || s->container == NULL
                || s->running_since >= sb->reconcile_started
                || entry_runs(entries, n, s->container)) {
                continue;
            }
            sl__sandbox_remove(s, "its container no longer runs (its node was lost?)", NULL, NULL);
            again = true;
            break;
        }
    }
}

static void reconcile(struct sl_sandboxes *sb, uint64_t now)
{
    if (sb->cfg.reconcile_ms == 0 || sb->reconciling || !sb->ready || now < sb->reconcile_at) {
        return;
    }
    sb->reconciling = true;
    sb->reconcile_started = now;
    sb->reconcile_at = now + sb->cfg.reconcile_ms;
    sb->cfg.launcher->ops->list(sb->cfg.launcher, SL__SANDBOX_LABEL, on_reconciled, sb);
}

/* ---- the sweep ---------------------------------------------------------------------------- */

static void on_sweep(uv_timer_t *t)
{
    struct sl_sandboxes *sb = t->data;
    uint64_t now = uv_now(sb->cfg.loop);
    int64_t wall = (int64_t)time(NULL);
    bool again = true;

    reconcile(sb, now);

    while (again) {
        again = false;
        for (struct sl__sandbox_waiter *w = sb->waiters; w != NULL; w = w->next) {
            if (now >= w->deadline) {
                waiter_fire(sb, w, false);
                again = true;
                break;
            }
        }
    }
    again = true;
    while (again) {
        again = false;
        for (struct sl__sandbox *s = sb->list; s != NULL; s = s->next) {
            if (s->state == SL__SANDBOX_STARTING && now >= s->start_deadline && s->reply != NULL) {
                if (s->pulling) {
                    sl__sandbox_pull_timed_out(s);
                } else {
                    sl__sandbox_create_failed(s, 503, "message",
                                              "the sandbox container did not start; try again");
                }
                again = true;
                break;
            }
            if (s->state != SL__SANDBOX_READY || s->busy > 0) {
                continue;
            }
            if (wall >= s->expires_unix) {
                sl__sandbox_remove(s, "its lifetime ended", NULL, NULL);
                again = true;
                break;
            }
            if (now - s->last_used >= sb->cfg.idle_timeout_ms) {
                sl__sandbox_remove(s, "idle", NULL, NULL);
                again = true;
                break;
            }
        }
    }
}

/* ---- snapshot entries --------------------------------------------------------------------- */

/* What an entry needs beyond struct sl_snapshot_build_client: whose and which repository it
 * is, and its git access as the refresh works it out. */
struct entry {
    const char *owner_id;
    const char *repo;
    enum sl_repo_role role;
    const char *header;
    const char *value;
    struct sl_snapshot_build_git git;
    struct sl_gitplat_repo meta;
    char problem[200];
};

struct clients_mem {
    struct sl_snapshot_build_client *items;
    /* Every entry's placeholders, one array. */
    struct sl_snapshot_build_placeholder *placeholders;
    /* `n_entries` of them, one per sandbox copied (items may be fewer after a refresh). */
    struct entry *entries;
    size_t n_entries;
    struct sl_snapshot_build_rule rule;
    char **strs;
    size_t n_strs;
};

static const char *keep(struct clients_mem *m, const char *s, bool *ok)
{
    char *copy = s != NULL ? sl_strdup(s) : NULL;

    if (s != NULL && copy == NULL) {
        *ok = false;
    }
    if (copy != NULL) {
        m->strs[m->n_strs++] = copy;
    }
    return copy;
}

/* Strings kept per entry: id, environment, token, ip, expiry, owner, repository, header, value. */
#define STRS_PER_ENTRY 9

int sl_sandboxes_clients(const struct sl_sandboxes *sb, struct sl_sandbox_clients *out)
{
    const struct sl_gitplat_remote *remote = sl__sandbox_remote(sb);
    struct clients_mem *m;
    size_t n = 0;
    size_t n_ph = 0;
    size_t at_ph = 0;
    bool ok = true;

    memset(out, 0, sizeof(*out));
    out->generation = sb->generation;
    out->git = sb->cfg.git;
    for (const struct sl__sandbox *s = sb->list; s != NULL; s = s->next) {
        n += s->state != SL__SANDBOX_GONE;
        n_ph += s->state != SL__SANDBOX_GONE ? s->n_placeholders : 0;
    }
    if (n == 0) {
        return 0;
    }
    m = sl_calloc(1, sizeof(*m));
    if (m == NULL) {
        return SL_ENOMEM;
    }
    m->items = sl_calloc(n, sizeof(*m->items));
    m->entries = sl_calloc(n, sizeof(*m->entries));
    m->strs = sl_calloc(n * STRS_PER_ENTRY + 2 * n_ph + 2, sizeof(char *));
    m->placeholders = n_ph > 0 ? sl_calloc(n_ph, sizeof(*m->placeholders)) : NULL;
    out->_mem = m;
    if (m->items == NULL || m->entries == NULL || m->strs == NULL
        || (n_ph > 0 && m->placeholders == NULL)) {
        sl_sandbox_clients_free(out);
        return SL_ENOMEM;
    }
    m->n_entries = n;
    /* The git host is reachable without the credential: the proxy puts that on the
     * repository's own paths only, from the entry's `git` object. */
    if (remote != NULL) {
        m->rule.host = keep(m, remote->host, &ok);
    }
    for (const struct sl__sandbox *s = sb->list; s != NULL; s = s->next) {
        struct sl_snapshot_build_client *c = &m->items[out->n];
        struct entry *e = &m->entries[out->n];
        char expires[32];

        if (s->state == SL__SANDBOX_GONE) {
            continue;
        }
        sl__sandbox_rfc3339(s->expires_unix, expires, sizeof(expires));
        c->id = keep(m, s->id, &ok);
        c->env_id = keep(m, s->env_id != NULL ? s->env_id : SL_SNAPSHOT_OFFLINE_ENV, &ok);
        c->token = keep(m, s->token, &ok);
        c->ip = s->ip[0] != '\0' ? keep(m, s->ip, &ok) : NULL;
        c->expires_at = keep(m, expires, &ok);
        if (remote != NULL) {
            c->rules = &m->rule;
            c->n_rules = 1;
        }
        e->owner_id = keep(m, s->owner_id, &ok);
        e->repo = keep(m, s->repo, &ok);
        e->role = s->role;
        e->header = keep(m, s->cred.header, &ok);
        e->value = keep(m, s->cred.value, &ok);
        c->placeholders = s->n_placeholders > 0 ? &m->placeholders[at_ph] : NULL;
        c->n_placeholders = s->n_placeholders;
        for (size_t i = 0; i < s->n_placeholders; i++, at_ph++) {
            m->placeholders[at_ph].env = keep(m, s->ph_env[i], &ok);
            m->placeholders[at_ph].value = keep(m, s->ph_value[i], &ok);
        }
        out->n++;
    }
    out->items = m->items;
    if (!ok) {
        sl_sandbox_clients_free(out);
        return SL_ENOMEM;
    }
    return 0;
}

/* Works out one entry's git access now. Returns 0 (with `*drop` set when the entry must go) or
 * an error of the platform. */
static int refresh_entry(struct sl_gitplat *gp, struct sl_snapshot_build_client *c, struct entry *e,
                         bool *drop)
{
    enum sl_repo_role now = SL_REPO_ROLE_NONE;
    enum sl_git_access access;
    int rc;

    *drop = false;
    /* As its creator's account can: an admin's sandbox stays an admin's. */
    SL_TRY(gp->ops->role(gp, e->repo, e->owner_id, true, &now));
    if (now == SL_REPO_ROLE_NONE) {
        *drop = true;
        return 0;
    }
    rc = gp->ops->repo(gp, e->repo, &e->meta);
    if (rc == SL_ENOTFOUND) {
        *drop = true;
        return 0;
    }
    if (rc == SL_EIO) {
        (void)snprintf(e->problem, sizeof(e->problem),
                       "the stored record of its repository %s is damaged", e->repo);
        c->problem = e->problem;
        return 0;
    }
    SL_TRY(rc);
    access = sl_git_access_of(e->role, now, e->meta.archived);
    if (access == SL_GIT_ACCESS_NONE) {
        *drop = true;
        return 0;
    }
    if (gp->remote == NULL || e->header == NULL || e->value == NULL) {
        return 0;
    }
    e->git.host = gp->remote->host;
    e->git.base_path = gp->remote->base_path;
    e->git.repo = e->repo;
    e->git.access = sl_git_access_name(access);
    e->git.header = e->header;
    e->git.value = e->value;
    e->git.default_branch = e->meta.default_branch;
    e->git.protected_branches = (const char *const *)e->meta.protected_branches;
    e->git.n_protected = e->meta.n_protected;
    c->git = &e->git;
    return 0;
}

int sl_sandbox_clients_refresh(struct sl_sandbox_clients *c)
{
    struct clients_mem *m = c->_mem;
    size_t kept = 0;

    if (c->git == NULL || m == NULL) {
        return 0;
    }
    for (size_t i = 0; i < c->n; i++) {
        bool drop = false;

        SL_TRY(refresh_entry(c->git, &m->items[i], &m->entries[i], &drop));
        if (drop) {
            sl_log(SL_LOG_INFO, 0,
                   "msg=\"a sandbox's creator has no access to its repository any more: its "
                   "entry leaves the snapshot\" sandbox=%s repo=%s",
                   m->items[i].id, m->entries[i].repo);
            continue;
        }
        /* Items move down; each one's `git` and `problem` point into its entry, which stays. */
        m->items[kept++] = m->items[i];
    }
    c->n = kept;
    return 0;
}

void sl_sandbox_clients_free(struct sl_sandbox_clients *c)
{
    struct clients_mem *m = c->_mem;

    if (m != NULL) {
        for (size_t i = 0; m->entries != NULL && i < m->n_entries; i++) {
            sl_gitplat_repo_finish(&m->entries[i].meta);
        }
        sl__sandbox_free_strv(m->strs, m->n_strs, true);
        sl_free(m->items);
        sl_free(m->entries);
        sl_free(m->placeholders);
        sl_free(m);
    }
    memset(c, 0, sizeof(*c));
}

/* ---- start, status, close ----------------------------------------------------------------- */

/* The start sequence failed: say why (status and log) and end it. */
static void fail_start(struct sl_sandboxes *sb, const char *what, const char *err)
{
    (void)snprintf(sb->error, sizeof(sb->error), "%s: %s", what, err != NULL ? err : "failed");
    sl_log(SL_LOG_ERROR, 0, "msg=\"sandboxes are not available\" err=\"%s\"", sb->error);
    sb->pending_removes--;
    sl__sandboxes_maybe_closed(sb);
}

static void on_leftover_removed(void *arg, int rc, const char *err)
{
    struct sl_sandboxes *sb = arg;

    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot remove a leftover sandbox container\" err=\"%s\"",
               err != NULL ? err : sl_strerror(rc));
    }
    if (--sb->pending_removes == 0 && !sb->closing) {
        sb->ready = true;
        sl_log(SL_LOG_INFO, 0, "msg=\"sandboxes ready\" network=%s gateway=%s", sb->network,
               sb->gateway);
    }
    sl__sandboxes_maybe_closed(sb);
}

static void on_listed(void *arg, int rc, const char *err, const struct sl_launcher_entry *entries,
                      size_t n)
{
    struct sl_sandboxes *sb = arg;

    if (rc < 0) {
        fail_start(sb, "cannot list containers", err);
        return;
    }
    for (size_t i = 0; i < n && !sb->closing; i++) {
        bool ours = false;

        for (size_t k = 0; k < entries[i].n_labels; k++) {
            if (strcmp(entries[i].labels[k].key, SL__SANDBOX_LABEL_NETWORK) == 0
                && strcmp(entries[i].labels[k].value, sb->network) == 0) {
                ours = true;
            }
        }
        if (!ours) {
            continue;
        }
        sl_log(SL_LOG_WARN, 0,
               "msg=\"removing a sandbox container left by an earlier run\" container=%.12s "
               "name=%s",
               entries[i].id, entries[i].name);
        sb->pending_removes++;
        sb->cfg.launcher->ops->remove(sb->cfg.launcher, entries[i].id, on_leftover_removed, sb);
    }
    /* The list's own count. */
    on_leftover_removed(sb, 0, NULL);
}

static void on_network(void *arg, int rc, const char *err)
{
    struct sl_sandboxes *sb = arg;

    if (rc < 0) {
        fail_start(sb, "cannot set up the sandbox network", err);
        return;
    }
    sb->cfg.launcher->ops->list(sb->cfg.launcher, SL__SANDBOX_LABEL, on_listed, sb);
}

static void on_ping(void *arg, int rc, const char *err)
{
    struct sl_sandboxes *sb = arg;
    struct sl_launcher_network net = { sb->network, sb->network, sb->subnet, sb->gateway };

    if (rc < 0) {
        fail_start(sb, "the container runtime does not answer", err);
        return;
    }
    sb->cfg.launcher->ops->ensure_network(sb->cfg.launcher, &net, on_network, sb);
}

void sl_sandboxes_start(struct sl_sandboxes *sb)
{
    /* The start sequence counts as one pending removal until it is done. */
    sb->pending_removes++;
    sb->cfg.launcher->ops->ping(sb->cfg.launcher, on_ping, sb);
}

bool sl_sandboxes_is_ready(const struct sl_sandboxes *sb)
{
    return sb->ready && !sb->closing;
}

const char *sl_sandboxes_gateway(const struct sl_sandboxes *sb)
{
    return sb->gateway;
}

void sl_sandboxes_status(const struct sl_sandboxes *sb, json_t *doc)
{
    size_t open = 0;

    for (const struct sl__sandbox *s = sb->list; s != NULL; s = s->next) {
        open += s->state != SL__SANDBOX_GONE;
    }
    (void)json_object_set_new(doc, "sandboxes",
                              json_pack("{s:b, s:s, s:s, s:I, s:s}", "ready", sb->ready, "network",
                                        sb->network, "gateway", sb->gateway, "open",
                                        (json_int_t)open, "error", sb->error));
}

/* Frees the manager's copies of its settings and the manager. */
static void free_manager(struct sl_sandboxes *sb)
{
    sl_free(sb->ca_bundle);
    sl_free(sb->resolv_conf);
    sl_free(sb->api_url);
    sl_free(sb->proxy_name);
    sl_free(sb);
}

static void on_sweep_closed(uv_handle_t *h)
{
    struct sl_sandboxes *sb = h->data;
    void (*closed)(void *) = sb->closed;
    void *arg = sb->closed_arg;

    free_manager(sb);
    if (closed != NULL) {
        closed(arg);
    }
}

static void on_launcher_closed(void *arg)
{
    struct sl_sandboxes *sb = arg;

    uv_close((uv_handle_t *)&sb->sweep, on_sweep_closed);
}

void sl__sandboxes_maybe_closed(struct sl_sandboxes *sb)
{
    if (!sb->closing || sb->shutting || sb->pending_removes > 0 || sb->starting > 0
        || sb->list != NULL) {
        return;
    }
    sb->shutting = true;
    sb->cfg.launcher->ops->close(sb->cfg.launcher, on_launcher_closed, sb);
}

void sl_sandboxes_close(struct sl_sandboxes *sb, void (*closed)(void *arg), void *arg)
{
    if (sb->closing) {
        return;
    }
    sb->closing = true;
    sb->ready = false;
    sb->closed = closed;
    sb->closed_arg = arg;
    (void)uv_timer_stop(&sb->sweep);
    while (sb->waiters != NULL) {
        waiter_fire(sb, sb->waiters, false);
    }
    while (sb->list != NULL) {
        struct sl__sandbox *s = sb->list;

        if (s->reply != NULL) {
            sl__sandbox_create_failed(s, 503, "message", "the control plane is stopping");
        } else {
            sl__sandbox_remove(s, "the control plane is stopping", NULL, NULL);
        }
    }
    sl__sandboxes_maybe_closed(sb);
}

/* ---- creation of the manager -------------------------------------------------------------- */

int sl_sandboxes_subnet_gateway(const char *cidr, char *gateway, size_t cap)
{
    char addr[INET_ADDRSTRLEN];
    const char *slash = cidr != NULL ? strchr(cidr, '/') : NULL;
    struct in_addr a;
    char *end = NULL;
    long bits;
    uint32_t host;

    if (slash == NULL || (size_t)(slash - cidr) >= sizeof(addr)) {
        return SL_EINVAL;
    }
    memcpy(addr, cidr, (size_t)(slash - cidr));
    addr[slash - cidr] = '\0';
    /* Digits only: strtol would also take a sign or leading blanks. */
    if (slash[1] < '0' || slash[1] > '9') {
        return SL_EINVAL;
    }
    bits = strtol(slash + 1, &end, 10);
    if (inet_pton(AF_INET, addr, &a) != 1 || *end != '\0' || bits < 8 || bits > 29) {
        return SL_EINVAL;
    }
    host = ntohl(a.s_addr);
    if ((host & ~(0xFFFFFFFFu << (32 - bits))) != 0) {
        return SL_EINVAL;
    }
    a.s_addr = htonl(host + 1);
    return inet_ntop(AF_INET, &a, gateway, (socklen_t)cap) != NULL ? 0 : SL_EINVAL;
}

static bool is_network_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 15) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')
              || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.')) {
            return false;
        }
    }
    return s[0] != '-' && s[0] != '.';
}

int sl_sandboxes_create(const struct sl_sandboxes_config *cfg, struct sl_sandboxes **out, char *err,
                        size_t errlen)
{
    struct sl_sandboxes *sb;
    int rc = 0;

    if (cfg->network == NULL || !is_network_name(cfg->network)) {
        (void)snprintf(err, errlen,
                       "--network: 1 to 15 letters, digits, '-', '_' or '.' (it names the "
                       "bridge interface too)");
        return SL_EINVAL;
    }
    if (cfg->proxy_port == 0 || cfg->proxy_port > 65535) {
        (void)snprintf(err, errlen, "--proxy-port: a port from 1 to 65535 is required");
        return SL_EINVAL;
    }
    if (cfg->redirect_port == 0 || cfg->redirect_port > 65535) {
        (void)snprintf(err, errlen, "--transparent-port: a port from 1 to 65535 is required");
        return SL_EINVAL;
    }
    sb = sl_calloc(1, sizeof(*sb));
    if (sb == NULL) {
        return SL_ENOMEM;
    }
    sb->cfg = *cfg;
    (void)snprintf(sb->network, sizeof(sb->network), "%s", cfg->network);
    (void)snprintf(sb->subnet, sizeof(sb->subnet), "%s", cfg->subnet);
    if (cfg->subnet == NULL || strlen(cfg->subnet) >= sizeof(sb->subnet)
        || sl_sandboxes_subnet_gateway(cfg->subnet, sb->gateway, sizeof(sb->gateway)) < 0) {
        (void)snprintf(err, errlen,
                       "--subnet: an IPv4 network like 10.213.0.0/24 (prefix 8 to 29, host "
                       "bits zero) is required");
        rc = SL_EINVAL;
    }
    if (rc == 0) {
        sb->ca_bundle = sl_malloc(cfg->ca_bundle_len + 1);
        sb->resolv_conf = cfg->resolv_conf != NULL ? sl_strdup(cfg->resolv_conf) : NULL;
        sb->api_url = cfg->api_url != NULL ? sl_strdup(cfg->api_url) : NULL;
        sb->proxy_name = cfg->proxy_name != NULL ? sl_strdup(cfg->proxy_name) : NULL;
        if (sb->ca_bundle == NULL || (cfg->resolv_conf != NULL && sb->resolv_conf == NULL)
            || (cfg->api_url != NULL && sb->api_url == NULL)
            || (cfg->proxy_name != NULL && sb->proxy_name == NULL)) {
            rc = SL_ENOMEM;
        } else {
            memcpy(sb->ca_bundle, cfg->ca_bundle, cfg->ca_bundle_len);
        }
    }
    if (rc < 0) {
        free_manager(sb);
        return rc;
    }
    sb->cfg.network = sb->network;
    sb->cfg.subnet = sb->subnet;
    sb->cfg.ca_bundle = sb->ca_bundle;
    sb->cfg.resolv_conf = sb->resolv_conf;
    sb->cfg.api_url = sb->api_url;
    sb->cfg.proxy_name = sb->proxy_name;
    if (sb->cfg.idle_timeout_ms == 0) {
        sb->cfg.idle_timeout_ms = (uint64_t)SL_SANDBOX_DEFAULT_IDLE_S * 1000;
    }
    if (sb->cfg.lifetime_ms == 0) {
        sb->cfg.lifetime_ms = (uint64_t)SL_SANDBOX_DEFAULT_LIFETIME_S * 1000;
    }
    if (sb->cfg.start_timeout_ms == 0) {
        sb->cfg.start_timeout_ms = SL_SANDBOX_START_TIMEOUT_MS;
    }
    SL_BUG_ON(uv_timer_init(cfg->loop, &sb->sweep) != 0);
    sb->sweep.data = sb;
    (void)uv_timer_start(&sb->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
    *out = sb;
    return 0;
}
