/* SPDX-License-Identifier: Apache-2.0 */
#include "policy/decision.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "policy/snapshot_int.h"

const char *sl_reason_code(enum sl_reason r)
{
    switch (r) {
    case SL_REASON_NONE:
        return "none";
    case SL_REASON_NO_POLICY:
        return "no-policy";
    case SL_REASON_NO_IDENTITY:
        return "no-identity";
    case SL_REASON_EXPIRED:
        return "expired";
    case SL_REASON_BAD_REQUEST:
        return "bad-request";
    case SL_REASON_BAD_HOST:
        return "bad-host";
    case SL_REASON_HOST_NOT_ALLOWED:
        return "host-not-allowed";
    case SL_REASON_PORT_NOT_ALLOWED:
        return "port-not-allowed";
    case SL_REASON_METHOD_NOT_ALLOWED:
        return "method-not-allowed";
    case SL_REASON_CREDENTIAL_NEEDS_TLS:
        return "credential-needs-tls";
    case SL_REASON_HOST_MISMATCH:
        return "host-mismatch";
    case SL_REASON_PRIVATE_ADDRESS:
        return "private-address";
    case SL_REASON_NOT_TLS:
        return "not-tls";
    case SL_REASON_DNS:
        return "dns";
    case SL_REASON_UPSTREAM_UNREACHABLE:
        return "upstream-unreachable";
    case SL_REASON_UPSTREAM_TLS:
        return "upstream-tls";
    case SL_REASON_UPSTREAM_TIMEOUT:
        return "upstream-timeout";
    case SL_REASON_TOO_LARGE:
        return "too-large";
    case SL_REASON_OVERLOADED:
        return "overloaded";
    case SL_REASON_AUDIT_UNAVAILABLE:
        return "audit-unavailable";
    case SL_REASON_GIT_READ_ONLY:
        return "git-read-only";
    case SL_REASON_GIT_PROTECTED_BRANCH:
        return "git-protected-branch";
    case SL_REASON_GIT_BAD_PUSH:
        return "git-bad-push";
    case SL_REASON_PLACEHOLDER_MISUSE:
        return "placeholder-misuse";
    case SL_REASON_UPSTREAM_CLOSED:
        return "upstream-closed";
    case SL_REASON_CLIENT_OVERLOADED:
        return "client-overloaded";
    case SL_REASON_OUT_OF_MEMORY:
        return "out-of-memory";
    }
    return "unknown";
}

int sl_reason_status(enum sl_reason r)
{
    switch (r) {
    case SL_REASON_NONE:
        return 200;
    case SL_REASON_NO_IDENTITY:
        return 407;
    case SL_REASON_EXPIRED:
    case SL_REASON_HOST_NOT_ALLOWED:
    case SL_REASON_PORT_NOT_ALLOWED:
    case SL_REASON_METHOD_NOT_ALLOWED:
    case SL_REASON_CREDENTIAL_NEEDS_TLS:
    case SL_REASON_PRIVATE_ADDRESS:
    case SL_REASON_GIT_READ_ONLY:
    case SL_REASON_GIT_PROTECTED_BRANCH:
    case SL_REASON_PLACEHOLDER_MISUSE:
        return 403;
    case SL_REASON_BAD_REQUEST:
    case SL_REASON_BAD_HOST:
    case SL_REASON_NOT_TLS:
    case SL_REASON_GIT_BAD_PUSH:
        return 400;
    case SL_REASON_HOST_MISMATCH:
        return 421;
    case SL_REASON_TOO_LARGE:
        return 431;
    case SL_REASON_DNS:
    case SL_REASON_UPSTREAM_UNREACHABLE:
    case SL_REASON_UPSTREAM_TLS:
    case SL_REASON_UPSTREAM_CLOSED:
        return 502;
    case SL_REASON_UPSTREAM_TIMEOUT:
        return 504;
    case SL_REASON_NO_POLICY:
    case SL_REASON_OVERLOADED:
    case SL_REASON_CLIENT_OVERLOADED:
    case SL_REASON_OUT_OF_MEMORY:
    case SL_REASON_AUDIT_UNAVAILABLE:
        return 503;
    }
    return 500;
}

static void deny(struct sl_decision *out, enum sl_reason r)
{
    out->allow = false;
    out->reason = r;
}

static bool method_allowed(const struct sl__rule *r, const char *method)
{
    if (r->n_methods == 0) {
        return true;
    }
    for (uint32_t i = 0; i < r->n_methods; i++) {
        if (strcmp(r->methods[i], method) == 0) {
            return true;
        }
    }
    return false;
}

/* The winner decides alone: a less specific rule never rescues what it refused. On the
 * client's git host (`git_host`) the rule's credential is not looked at: the git object decides
 * the credential there (apply_git()). */
static void decide_by_rule(const struct sl__match *m, const struct sl_request_view *req,
                           bool git_host, struct sl_decision *out)
{
    const struct sl__rule *r = m->rule;
    const struct sl__credential *credential = git_host ? NULL : r->credential;

    out->rule = r->text;
    out->rule_has_credential = credential != NULL;
    out->passthrough = r->passthrough;
    out->_rule_exact = r->cls == SL__RULE_EXACT;
    out->_rule_of_client = m->of_client;
    out->_rule_methods = r->methods;
    out->_rule_n_methods = r->n_methods;
    if (req->method == NULL) {
        /* A tunnel: its requests are decided one by one, credential included. */
        return;
    }
    if (r->passthrough && !req->tls) {
        deny(out, SL_REASON_NOT_TLS);
        return;
    }
    if (!method_allowed(r, req->method)) {
        deny(out, SL_REASON_METHOD_NOT_ALLOWED);
        out->_by_methods = true;
        return;
    }
    if (credential == NULL) {
        return;
    }
    /* TRACE echoes the request, injected secret included, back to the client. */
    if (strcmp(req->method, "TRACE") == 0) {
        deny(out, SL_REASON_METHOD_NOT_ALLOWED);
        return;
    }
    if (!req->tls) {
        deny(out, SL_REASON_CREDENTIAL_NEEDS_TLS);
        return;
    }
    if (credential->placeholder_env != NULL) {
        /* Replaced where the client put its placeholder, never injected (placeholder.h). */
        out->_placeholder_env = credential->placeholder_env;
        return;
    }
    out->credential_header = credential->header;
    out->credential_value = credential->value;
}

/* Does the request go to the client's git host? */
static bool on_git_host(const struct sl_git *g, const struct sl_request_view *req)
{
    return g != NULL && req->method != NULL && req->port == g->port && req->host->len == g->host.len
           && memcmp(req->host->name, g->host.name, g->host.len) == 0;
}

/* Does `method` go with the own-repository path `path` (policy/git.h)? */
static bool git_method_fits(enum sl_git_path path, const char *method)
{
    switch (path) {
    case SL_GIT_PATH_NONE:
        return false;
    case SL_GIT_PATH_INFO_REFS_UPLOAD:
    case SL_GIT_PATH_INFO_REFS_RECEIVE:
        return strcmp(method, "GET") == 0;
    case SL_GIT_PATH_UPLOAD_PACK:
    case SL_GIT_PATH_RECEIVE_PACK:
        return strcmp(method, "POST") == 0;
    case SL_GIT_PATH_LFS:
    case SL_GIT_PATH_LFS_BATCH:
        return true;
    }
    return false;
}

/* Would `method` on the own path `path` change the repository (refused under read access)? */
static bool git_is_write(enum sl_git_path path, const char *method)
{
    bool reads = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;

    switch (path) {
    case SL_GIT_PATH_INFO_REFS_RECEIVE:
    case SL_GIT_PATH_RECEIVE_PACK:
        return true;
    case SL_GIT_PATH_LFS:
        return !reads;
    case SL_GIT_PATH_LFS_BATCH:
        return !reads && strcmp(method, "POST") != 0;
    case SL_GIT_PATH_NONE:
    case SL_GIT_PATH_INFO_REFS_UPLOAD:
    case SL_GIT_PATH_UPLOAD_PACK:
        return false;
    }
    return true;
}

/* An allowed request on the client's git host: the git object's credential on the
 * repository's own paths, and its refusals (policy/decision.h, sl_policy_decide()). */
static void apply_git(const struct sl_git *g, const struct sl_request_view *req,
                      struct sl_decision *out)
{
    enum sl_git_path path = SL_GIT_PATH_NONE;

    if (req->target != NULL) {
        path = sl_git_path_of(sl_slice_of(g->base_path, g->base_len),
                              sl_slice_of(g->repo, g->repo_len), sl_slice_str(req->target));
    }
    out->git_path = path;
    if (path == SL_GIT_PATH_NONE) {
        return;
    }
    /* A method-override header could make the server run TRACE on a request that carries the
     * credential: TRACE on an own path is refused whatever the path takes. */
    if (strcmp(req->method, "TRACE") == 0) {
        deny(out, SL_REASON_METHOD_NOT_ALLOWED);
        return;
    }
    if (!git_method_fits(path, req->method)) {
        return;
    }
    if (!req->tls) {
        deny(out, SL_REASON_CREDENTIAL_NEEDS_TLS);
        return;
    }
    if (!g->write && git_is_write(path, req->method)) {
        deny(out, SL_REASON_GIT_READ_ONLY);
        return;
    }
    out->git_credential = true;
    out->rule_has_credential = true;
    out->credential_header = g->credential->header;
    out->credential_value = g->credential->value;
    if (path == SL_GIT_PATH_RECEIVE_PACK) {
        out->git_push = g;
    }
}

/* One of the client's placeholders in the host name or the target, or NULL. */
static const struct sl_placeholder *misused(const struct sl_client *c,
                                            const struct sl_request_view *req)
{
    const struct sl_placeholder *ph = sl_placeholder_scan(
            c->placeholders, c->n_placeholders, sl_slice_of(req->host->name, req->host->len), NULL);

    if (ph == NULL && req->target != NULL) {
        ph = sl_placeholder_scan(c->placeholders, c->n_placeholders, sl_slice_str(req->target),
                                 NULL);
    }
    return ph;
}

/* Observe (docs/reference/snapshot.md §3 `observe_until`): what no rule allows goes out, marked,
 * without a credential; what a rule refuses for safety (TRACE through a credential, plain HTTP
 * for a credential or a passthrough rule, git's checks) stays refused. */
static void observe(const struct sl_env *env, int64_t now_s, struct sl_decision *out)
{
    bool observable = out->reason == SL_REASON_HOST_NOT_ALLOWED
                      || out->reason == SL_REASON_PORT_NOT_ALLOWED
                      || (out->reason == SL_REASON_METHOD_NOT_ALLOWED && out->_by_methods);

    if (out->allow || !observable || !env->has_observe || env->observe_until <= now_s) {
        return;
    }
    out->observed = true;
    out->would_deny = out->reason;
    out->allow = true;
    out->reason = SL_REASON_NONE;
    out->passthrough = false;
    out->credential_header = NULL;
    out->credential_value = NULL;
    out->_placeholder_env = NULL;
}

/* The client's placeholder for variable `env`, or NULL. */
static const struct sl_placeholder *placeholder_of(const struct sl_client *c, const char *env)
{
    for (uint32_t i = 0; i < c->n_placeholders; i++) {
        if (strcmp(c->placeholders[i].env, env) == 0) {
            return &c->placeholders[i];
        }
    }
    return NULL;
}

void sl_policy_decide(const struct sl_snapshot *s, const struct sl_client *c,
                      const struct sl_request_view *req, int64_t now_s, struct sl_decision *out)
{
    struct sl__match m = { NULL, false, false, false };
    bool git_host;

    *out = (struct sl_decision){ .allow = true, .reason = SL_REASON_NONE };
    if (s == NULL) {
        deny(out, SL_REASON_NO_POLICY);
        return;
    }
    if (c == NULL) {
        deny(out, SL_REASON_NO_IDENTITY);
        return;
    }
    out->client = c->id;
    out->environment = c->env->name;
    out->environment_label = c->env->label;
    if (c->has_expiry && c->expires_at <= now_s) {
        deny(out, SL_REASON_EXPIRED);
        return;
    }
    if (req->host == NULL || req->host->len == 0) {
        deny(out, SL_REASON_BAD_REQUEST);
        return;
    }
    if (c->n_placeholders > 0) {
        out->placeholders = c->placeholders;
        out->n_placeholders = c->n_placeholders;
        out->misused = misused(c, req);
        if (out->misused != NULL) {
            deny(out, SL_REASON_PLACEHOLDER_MISUSE);
            return;
        }
    }
    /* Client rules first: on equal specificity they win (docs/reference/snapshot.md §3). */
    sl__ruleset_match(&c->rules, req->host, req->port, true, &m);
    sl__ruleset_match(&c->env->rules, req->host, req->port, false, &m);
    git_host = on_git_host(c->git, req);
    out->git_host = git_host;
    if (m.rule != NULL) {
        decide_by_rule(&m, req, git_host, out);
    } else if (!c->env->default_allow) {
        deny(out, m.host_seen ? SL_REASON_PORT_NOT_ALLOWED : SL_REASON_HOST_NOT_ALLOWED);
        /* A port-not-allowed host named by a passthrough rule on another port. */
        out->passthrough = m.passthrough_seen;
    }
    observe(c->env, now_s, out);
    if (out->allow && git_host && !out->observed) {
        apply_git(c->git, req, out);
    }
    if (out->allow && out->_placeholder_env != NULL) {
        out->placeholder = placeholder_of(c, out->_placeholder_env);
    }
}

/* Is `s` an RFC 9110 token, so that it can go between JSON quotes as it is? */
static bool is_token(const char *s)
{
    if (*s == '\0') {
        return false;
    }
    for (; *s != '\0'; s++) {
        uint8_t c = (uint8_t)*s;

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
              || (strchr("!#$%&'*+-.^_`|~", c) != NULL))) {
            return false;
        }
    }
    return true;
}

/* A bounded appender for hints. */
struct hint {
    char *buf;
    size_t cap;
    size_t len;
    bool overflow;
};

static void put(struct hint *h, const char *fmt, ...) SL_PRINTF(2, 3);

static void put(struct hint *h, const char *fmt, ...)
{
    va_list ap;
    int w;

    if (h->overflow) {
        return;
    }
    va_start(ap, fmt);
    w = vsnprintf(h->buf + h->len, h->cap - h->len, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= h->cap - h->len) {
        h->overflow = true;
        return;
    }
    h->len += (size_t)w;
}

/* `{"host":"api.github.com","methods":["GET","POST"]}`: the winner's methods (a wildcard rule
 * that refused the method) plus the request's, so that the new, more specific rule keeps
 * allowing what the old one did for this host. */
static void put_rule(struct hint *h, const struct sl_decision *d, const struct sl_request_view *req,
                     bool keep_methods)
{
    put(h, "{\"host\":\"%s", req->host->name);
    if (req->port != 443 && req->port != 80) {
        put(h, ":%u", (unsigned)req->port);
    }
    if (req->method == NULL) {
        /* A tunnel: a rule for the host, any method. */
        put(h, "\"}");
        return;
    }
    put(h, "\",\"methods\":[");
    for (uint32_t i = 0; keep_methods && i < d->_rule_n_methods; i++) {
        put(h, "\"%s\",", d->_rule_methods[i]);
    }
    put(h, "\"%s\"]}", req->method);
}

/* What the hint calls the environment: its label, else its name. */
static const char *shown_env(const struct sl_decision *d)
{
    return d->environment_label != NULL ? d->environment_label : d->environment;
}

static void put_place(struct hint *h, const struct sl_decision *d)
{
    if (d->_rule_of_client) {
        put(h, "the runtime rules of client %s", d->client);
    } else {
        put(h, "environment %s", shown_env(d));
    }
}

int sl_policy_hint(const struct sl_decision *d, const struct sl_request_view *req, char *buf,
                   size_t cap)
{
    struct hint h = { buf, cap, 0, cap == 0 };

    if (cap > 0) {
        buf[0] = '\0';
    }
    if (d->allow || d->environment == NULL || req->host == NULL
        || (req->method != NULL && !is_token(req->method))) {
        return 0;
    }
    if (req->method == NULL && d->reason != SL_REASON_HOST_NOT_ALLOWED
        && d->reason != SL_REASON_PORT_NOT_ALLOWED && d->reason != SL_REASON_PLACEHOLDER_MISUSE) {
        return 0;
    }
    switch (d->reason) {
    case SL_REASON_METHOD_NOT_ALLOWED:
        if (d->git_path != SL_GIT_PATH_NONE && strcmp(req->method, "TRACE") == 0) {
            put(&h, "TRACE is never allowed on the paths of the client's git repository (it "
                    "would echo the credential)");
        } else if (d->rule_has_credential && strcmp(req->method, "TRACE") == 0) {
            put(&h, "TRACE is never allowed through a rule with a credential (it would echo "
                    "the secret)");
        } else if (d->_rule_exact) {
            /* A new rule for the same host would tie and lose on order: extend the winner. */
            put(&h, "to allow it, add \"%s\" to the methods of {\"host\":\"%s\"} in ", req->method,
                d->rule);
            put_place(&h, d);
        } else {
            put(&h, "to allow it, add ");
            put_rule(&h, d, req, true);
            put(&h, " to environment %s", shown_env(d));
        }
        break;
    case SL_REASON_HOST_NOT_ALLOWED:
    case SL_REASON_PORT_NOT_ALLOWED:
        put(&h, "to allow it, add ");
        put_rule(&h, d, req, false);
        put(&h, " to environment %s", shown_env(d));
        break;
    case SL_REASON_CREDENTIAL_NEEDS_TLS:
        put(&h, "to allow it, use https: credentials are only injected over TLS");
        break;
    case SL_REASON_PLACEHOLDER_MISUSE:
        if (d->misused == NULL) {
            return 0;
        }
        put(&h,
            "the placeholder in %s stands for a credential of {\"host\":\"%s\"}: it is replaced "
            "only in its %s header of requests over https to that host",
            d->misused->env, d->misused->rule, d->misused->header);
        break;
    case SL_REASON_NOT_TLS:
        if (!d->passthrough) {
            return 0;
        }
        put(&h,
            "to allow it, use https: rule {\"host\":\"%s\",\"tls\":\"passthrough\"} only "
            "relays TLS tunnels, uninspected",
            d->rule);
        break;
    case SL_REASON_NONE:
    case SL_REASON_NO_POLICY:
    case SL_REASON_NO_IDENTITY:
    case SL_REASON_EXPIRED:
    case SL_REASON_BAD_REQUEST:
    case SL_REASON_BAD_HOST:
    case SL_REASON_HOST_MISMATCH:
    case SL_REASON_PRIVATE_ADDRESS:
    case SL_REASON_DNS:
    case SL_REASON_UPSTREAM_UNREACHABLE:
    case SL_REASON_UPSTREAM_TLS:
    case SL_REASON_UPSTREAM_TIMEOUT:
    case SL_REASON_UPSTREAM_CLOSED:
    case SL_REASON_TOO_LARGE:
    case SL_REASON_OVERLOADED:
    case SL_REASON_CLIENT_OVERLOADED:
    case SL_REASON_OUT_OF_MEMORY:
    case SL_REASON_AUDIT_UNAVAILABLE:
    case SL_REASON_GIT_READ_ONLY:
    case SL_REASON_GIT_PROTECTED_BRANCH:
    case SL_REASON_GIT_BAD_PUSH:
        return 0;
    }
    if (h.overflow) {
        if (cap > 0) {
            buf[0] = '\0';
        }
        return SL_ETOOBIG;
    }
    return (int)h.len;
}
