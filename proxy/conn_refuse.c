/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/conn_refuse.c - a connection's current request: its bookkeeping, the client's identity
 * (Proxy-Authorization), the policy decision (method overrides included), the refusals the
 * proxy answers itself (docs/reference/proxy.md §4.5) and the audit line every request ends with
 * (docs/reference/README.md §4.9). A room of proxy/conn_int.h.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "http/h1.h"
#include "http/server.h"
#include "policy/auth.h"
#include "policy/decision.h"
#include "policy/host.h"
#include "policy/placeholder.h"
#include "policy/snapshot.h"
#include "policy/validate.h"
#include "proxy/audit.h"
#include "proxy/conn_int.h"
#include "proxy/upstream.h"

/* Longest request target quoted back in a refusal. */
#define QUOTE_MAX 200
/* What a git-read-only refusal says (git shows it as `remote: ...`). */
#define GIT_READ_ONLY_DETAIL                                                                  \
    "this client's git access to the repository is read-only: pushes and Git LFS writes are " \
    "refused"

/*
 * Bookkeeping, audit lines, refusals.
 */

void sl__conn_begin_request(struct sl__conn *c, const char *method)
{
    c->r = (struct sl__req_info){ .method = method,
                                  .scheme = sl__conn_is_intercepted(c) ? "https" : "http",
                                  .start_ns = uv_hrtime(),
                                  .allow = true,
                                  .reason = SL_REASON_NONE };
    c->dec = (struct sl_decision){ .allow = false };
    sl_snapshot_unref(c->snap);
    c->snap = c->w->snapshot != NULL ? sl_snapshot_ref(c->w->snapshot) : NULL;
    if (sl__conn_in_tunnel(c)) {
        sl__conn_note_identity(c);
    }
}

const uint64_t sl__latency_bounds_us[SL__LATENCY_BUCKETS - 1] = {
    1000, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
};

/* Counts one request of `elapsed_us` in the latency histogram (docs/reference/proxy.md §4.9). */
static void count_latency(struct sl__counters *k, uint64_t elapsed_us)
{
    size_t i = 0;

    while (i < SL__LATENCY_BUCKETS - 1 && elapsed_us > sl__latency_bounds_us[i]) {
        i++;
    }
    sl__count(&k->latency[i], 1);
    sl__count(&k->latency_sum_us, elapsed_us);
}

const char *sl__abort_side_name(enum sl__abort_side side)
{
    switch (side) {
    case SL__SIDE_CLIENT:
        return "client";
    case SL__SIDE_UPSTREAM:
        return "upstream";
    case SL__SIDE_BOTH:
        return "both";
    case SL__SIDE_N:
        break;
    }
    return "client";
}

const char *sl__abort_cause_name(enum sl__abort_cause cause)
{
    switch (cause) {
    case SL__ABORT_NONE:
        return NULL;
    case SL__ABORT_SEND_TIMEOUT:
        return "send-timeout";
    case SL__ABORT_IDLE_TIMEOUT:
        return "idle-timeout";
    case SL__ABORT_RESET:
        return "reset";
    case SL__ABORT_CLOSED:
        return "closed";
    case SL__ABORT_MALFORMED:
        return "malformed";
    case SL__ABORT_OUT_OF_MEMORY:
        return "out-of-memory";
    case SL__ABORT_N:
        break;
    }
    return NULL;
}

/* A refusal that is a failure rather than a decision of the policy's (docs/reference/proxy.md
 * §4.7): a reason sl__reason_is_policy() does not name. */
static bool is_failure(const struct sl__conn *c)
{
    return !c->r.allow && !c->r.challenge && !sl__reason_is_policy(c->r.reason);
}

void sl__conn_audit(struct sl__conn *c)
{
    const struct sl__shared *sh = c->w->shared;
    const uint64_t elapsed_ns = uv_hrtime() - c->r.start_ns;
    /* The CONNECT line of an opened tunnel: its requests are timed one by one instead. */
    const bool opens_tunnel =
            c->r.allow && c->r.method != NULL && strcmp(c->r.method, "CONNECT") == 0;
    /* What reached the client: what was written to its stream, less what is still there.
     * An exchange ends once its response has left (conn_forward.c), and a cut one is audited
     * after the close's last attempt (sl__conn_abort()); under TLS what waits is ciphertext,
     * counted as if it were the body's own bytes. */
    const uint64_t unsent = sl_stream_unsent(&c->client);
    const uint64_t down = c->r.bytes_down > unsent ? c->r.bytes_down - unsent : 0;
    struct sl_audit_record a = {
        .client = c->dec.client,
        .environment = c->dec.environment,
        .src = (const struct sockaddr *)&c->peer,
        .method = c->r.method,
        .scheme = c->r.scheme,
        .host = c->r.has_host ? c->r.host.name : NULL,
        .port = c->r.port,
        .path = c->r.target,
        .connect_host_header = c->r.target == NULL ? c->connect_host : NULL,
        .allow = c->r.allow,
        .challenge = c->r.challenge,
        .error = is_failure(c),
        .reason = c->r.reason,
        .observed = c->r.allow && c->dec.observed,
        .would_deny = c->dec.would_deny,
        .rule = c->dec.rule,
        .credential = c->r.credential,
        .passthrough = c->passthrough,
        .transparent = c->transparent,
        .status = c->r.status,
        .bytes_up = c->r.bytes_up,
        .bytes_down = down,
        .aborted_side =
                c->r.abort_cause != SL__ABORT_NONE ? sl__abort_side_name(c->r.abort_side) : NULL,
        .aborted_cause = sl__abort_cause_name(c->r.abort_cause),
        .ms = (double)elapsed_ns / 1e6,
        .policy_version = c->snap != NULL ? sl_snapshot_version(c->snap) : 0,
    };

    if (c->r.allow) {
        sl__count(&c->w->counters.requests_allowed, 1);
    } else if (c->r.challenge) {
        sl__count(&c->w->counters.requests_challenged, 1);
    } else if (a.error) {
        sl__count(&c->w->counters.requests_failed, 1);
        sl__count(&c->w->counters.failed_by_reason[c->r.reason], 1);
    } else {
        sl__count(&c->w->counters.requests_denied, 1);
        sl__count(&c->w->counters.denied_by_reason[c->r.reason], 1);
    }
    sl__count(&c->w->counters.bytes_up, c->r.bytes_up);
    sl__count(&c->w->counters.bytes_down, down);
    if (c->r.abort_cause != SL__ABORT_NONE) {
        sl__count(&c->w->counters.aborted[c->r.abort_side][c->r.abort_cause], 1);
    }
    if (!opens_tunnel) {
        count_latency(&c->w->counters, elapsed_ns / 1000u);
    }
    sl_audit_write(sh->audit, &a);
    if (sl_log_enabled(SL_LOG_DEBUG)) {
        sl_log(SL_LOG_DEBUG, c->id,
               "msg=request method=%s host=%s port=%u decision=%s reason=%s "
               "status=%d",
               c->r.method != NULL ? c->r.method : "-", a.host != NULL ? a.host : "-",
               (unsigned)c->r.port,
               a.allow       ? "allow"
               : a.challenge ? "challenge"
               : a.error     ? "error"
                             : "deny",
               sl_reason_code(c->r.reason), c->r.status);
    }
}

/* Appends `s` for a human: printable ASCII only, at most `max` bytes, cut at a '?' (a query
 * may carry secrets) when `cut_query`. */
static int put_quoted(struct sl_buf *b, const char *s, size_t max, bool cut_query)
{
    for (size_t i = 0; s[i] != '\0' && !(cut_query && s[i] == '?') && i < max; i++) {
        char ch = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';

        SL_TRY(sl_buf_append(b, &ch, 1));
    }
    return 0;
}

/* A request-target as sent: an absolute URL without its userinfo, or a path on the host the
 * request was taken for; without the query either way. */
static int put_sent_target(const struct sl__req_info *r, struct sl_buf *b)
{
    const char *s = r->sent_target;
    const char *auth = strstr(s, "://");

    if (s[0] == '/' && r->has_host) {
        SL_TRY(sl_buf_printf(b, "%s://%s", r->scheme, r->host.name));
        if (r->port != (strcmp(r->scheme, "https") == 0 ? 443 : 80)) {
            SL_TRY(sl_buf_printf(b, ":%u", (unsigned)r->port));
        }
    } else if (auth != NULL) {
        size_t end = strcspn(auth + 3, "/?#");
        const char *at = memchr(auth + 3, '@', end);

        if (at != NULL) {
            SL_TRY(put_quoted(b, s, (size_t)(auth + 3 - s), true));
            s = at + 1;
        }
    }
    return put_quoted(b, s, QUOTE_MAX, true);
}

/* "https://host[:port]/path" or "host:port" (CONNECT) for messages. */
static int put_request_url(struct sl__conn *c, struct sl_buf *b)
{
    const struct sl__req_info *r = &c->r;

    if (r->sent_target != NULL) {
        return put_sent_target(r, b);
    }
    if (!r->has_host) {
        return sl_buf_append_str(b, "(unparsed target)");
    }
    if (r->target == NULL) {
        return sl_buf_printf(b, "%s:%u", r->host.name, (unsigned)r->port);
    }
    SL_TRY(sl_buf_printf(b, "%s://%s", r->scheme, r->host.name));
    if (r->port != (strcmp(r->scheme, "https") == 0 ? 443 : 80)) {
        SL_TRY(sl_buf_printf(b, ":%u", (unsigned)r->port));
    }
    return put_quoted(b, r->target, QUOTE_MAX, true);
}

bool sl__reason_is_policy(enum sl_reason reason)
{
    switch (reason) {
    case SL_REASON_HOST_NOT_ALLOWED:
    case SL_REASON_PORT_NOT_ALLOWED:
    case SL_REASON_METHOD_NOT_ALLOWED:
    case SL_REASON_CREDENTIAL_NEEDS_TLS:
    case SL_REASON_EXPIRED:
    case SL_REASON_NO_IDENTITY:
    case SL_REASON_PRIVATE_ADDRESS:
    case SL_REASON_GIT_READ_ONLY:
    case SL_REASON_GIT_PROTECTED_BRANCH:
    case SL_REASON_PLACEHOLDER_MISUSE:
        return true;
    case SL_REASON_NONE:
    case SL_REASON_NO_POLICY:
    case SL_REASON_BAD_REQUEST:
    case SL_REASON_BAD_HOST:
    case SL_REASON_HOST_MISMATCH:
    case SL_REASON_NOT_TLS:
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
    case SL_REASON_GIT_BAD_PUSH:
        return false;
    }
    return false;
}

static const char *status_text(int status)
{
    const char *text = sl_http_reason(status);

    return text[0] != '\0' ? text : "Error";
}

void sl__conn_peer_address(const struct sl__conn *c, char *out, size_t len)
{
    const struct sockaddr_storage *sa = &c->peer;
    const void *a = NULL;

    if (sa->ss_family == AF_INET) {
        a = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
    } else if (sa->ss_family == AF_INET6) {
        a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    }
    if (a == NULL || inet_ntop(sa->ss_family, a, out, (socklen_t)len) == NULL) {
        (void)snprintf(out, len, "%s", "an unknown address");
    }
}

/* What a 407 no-identity says after the reason (docs/reference/proxy.md §4.2, §4.5): the source
 * address the proxy saw and why it names no client (`detail`, when the refusal has none of its
 * own: "malformed Proxy-Authorization" keeps its), then how a client is made or names itself.
 * A client comes from the policy file, or else from the control plane that pushes the snapshot:
 * the hint names the one this proxy has. Nothing of the credential sent is repeated. */
static int no_identity_text(const struct sl__conn *c, const char *detail, struct sl_buf *b)
{
    char addr[INET6_ADDRSTRLEN + 32];
    const char *where = sl__conn_cfg(c)->policy_file != NULL
                                ? "add a client with this \"ip\" (or a \"cidr\" holding it) to "
                                  "the policy file"
                                : "register this address as a client (POST /api/v1/clients "
                                  "{\"id\",\"environment\",\"ip\" or \"cidr\"} on the "
                                  "control plane)";

    sl__conn_peer_address(c, addr, sizeof(addr));
    SL_TRY(sl_buf_append_str(b, ": "));
    if (detail != NULL && detail[0] != '\0') {
        SL_TRY(sl_buf_printf(b, "%s from source address %s", detail, addr));
    } else if (c->has_auth) {
        SL_TRY(sl_buf_printf(b,
                             "the id and token of the Proxy-Authorization name no client at "
                             "source address %s",
                             addr));
    } else {
        SL_TRY(sl_buf_printf(b,
                             "source address %s is not a registered client, and the request "
                             "sent no Proxy-Authorization",
                             addr));
    }
    return sl_buf_printf(b,
                         "; to be identified, %s, or send a client's id and token as "
                         "Proxy-Authorization: Basic base64(ID:TOKEN) (curl --proxy-user "
                         "ID:TOKEN)",
                         where);
}

/* The one-line body of a refusal (docs/reference/proxy.md §4.5): what was refused and why, the
 * detail, and for a policy refusal what would allow it. */
static int refusal_body(struct sl__conn *c, enum sl_reason reason, const char *detail,
                        struct sl_buf *b)
{
    const char *method = c->r.method != NULL ? c->r.method : "request";
    const char *hint_method = c->r.override_method != NULL ? c->r.override_method : c->r.method;
    char hint[SL_POLICY_HINT_MAX];

    SL_TRY(sl_buf_printf(b, "sluice: %s ", method));
    SL_TRY(put_request_url(c, b));
    SL_TRY(sl_buf_printf(b, " %s: %s", sl__reason_is_policy(reason) ? "denied" : "failed",
                         sl_reason_code(reason)));
    if (c->dec.client != NULL) {
        SL_TRY(sl_buf_printf(b, " (client %s, environment %s)", c->dec.client,
                             c->dec.environment_label != NULL ? c->dec.environment_label
                                                              : c->dec.environment));
    }
    if (reason == SL_REASON_NO_IDENTITY && c->r.status == 407) {
        SL_TRY(no_identity_text(c, detail, b));
    } else if (detail != NULL && detail[0] != '\0') {
        SL_TRY(sl_buf_append_str(b, ": "));
        SL_TRY(put_quoted(b, detail, 400, false));
    }
    if (c->r.has_host && c->dec.environment != NULL) {
        struct sl_request_view v = { &c->r.host, c->r.port,
                                     c->r.target != NULL ? hint_method : NULL,
                                     sl__conn_is_intercepted(c), c->r.target };

        if (sl_policy_hint(&c->dec, &v, hint, sizeof(hint)) > 0) {
            SL_TRY(sl_buf_printf(b, "; %s", hint));
        }
    }
    /* A placeholder in the URL is not shown back (policy/placeholder.h). */
    sl_placeholder_mask((char *)b->p, b->len);
    return sl_buf_append_str(b, "\n");
}

/* Answers the current request with a refusal of the proxy's own and ends it. `keep` allows
 * the connection to go on (the request had no body left unread). */
void sl__conn_refuse(struct sl__conn *c, enum sl_reason reason, int status, const char *detail,
                     bool keep)
{
    struct sl_buf body;
    bool go_on = keep && c->r.client_keep_alive && !c->close_after && !c->w->draining;
    int rc;

    if (c->held != NULL) {
        /* Another refusal is the answer (a CONNECT with a body): one line, its own. */
        sl_snapshot_unref(c->held->snap);
        sl_free(c->held);
        c->held = NULL;
    }
    c->r.allow = false;
    c->r.reason = reason;
    c->r.status = status;
    sl_buf_init(&body, 4096);
    sl_buf_reset(&c->head);
    rc = refusal_body(c, reason, detail, &body);
    if (rc == 0) {
        /* The reason phrase names the proxy and the reason too: it is what some clients show of
         * a refusal (npm's "403 Forbidden - GET URL", pip's "403 Client Error: ... for url"). */
        rc = sl_buf_printf(&c->head,
                           "HTTP/1.1 %d %s (sluice: %s)\r\nX-Sluice-Reason: %s\r\nContent-Type: "
                           "text/plain; charset=utf-8\r\nContent-Length: %zu\r\n%s%s\r\n",
                           status, status_text(status), sl_reason_code(reason),
                           sl_reason_code(reason), body.len,
                           status == 407 ? "Proxy-Authenticate: Basic realm=\"sluice\"\r\n" : "",
                           go_on ? "" : "Connection: close\r\n");
    }
    if (rc == 0 && !c->r.is_head) {
        rc = sl_buf_append(&c->head, body.p, body.len);
    }
    sl_buf_finish(&body);
    if (rc == 0) {
        rc = sl_stream_write_all(&c->client, c->head.p, c->head.len);
    }
    if (rc < 0) {
        c->r.status = 0;
    }
    sl__conn_audit(c);
    if (c->up != NULL) {
        sl_upstream_close(c->up);
        c->up = NULL;
    }
    if (rc < 0 || !go_on) {
        sl__conn_end(c);
        return;
    }
    sl__conn_end_exchange(c);
}

/* Refuses with the status docs/reference/proxy.md §4.5 gives the reason. */
void sl__conn_refuse_reason(struct sl__conn *c, enum sl_reason reason, const char *detail,
                            bool keep)
{
    sl__conn_refuse(c, reason, sl_reason_status(reason), detail, keep);
}

/* Cuts the transfer short: the close first, so that the audit line counts what its last write
 * attempt still handed over. */
void sl__conn_abort(struct sl__conn *c, enum sl__abort_side side, enum sl__abort_cause cause)
{
    if (c->state == SL__CONN_CLOSED) {
        return;
    }
    if (cause == SL__ABORT_RESET) {
        /* A stream that failed for lack of memory failed on the proxy's side, not the peer's. */
        struct sl_stream *s = side == SL__SIDE_CLIENT ? &c->client
                              : c->up != NULL         ? sl_upstream_stream(c->up)
                                                      : NULL;

        if (s != NULL && sl_stream_error(s) == SL_ENOMEM) {
            cause = SL__ABORT_OUT_OF_MEMORY;
        }
    }
    c->r.abort_side = side;
    c->r.abort_cause = cause;
    sl_log(SL_LOG_DEBUG, c->id, "msg=\"transfer cut short\" host=%s side=%s cause=%s",
           c->r.has_host ? c->r.host.name : "-", sl__abort_side_name(side),
           sl__abort_cause_name(cause));
    sl__conn_close(c);
    sl__conn_audit(c);
}

/* A refusal that cannot be answered (TLS failed, not TLS, the client left): audit and close. In
 * a tunnel opened to answer a held refusal, that refusal is what its line says. */
void sl__conn_drop(struct sl__conn *c, enum sl_reason reason)
{
    if (c->held != NULL) {
        sl__conn_close(c);
        return;
    }
    c->r.allow = false;
    c->r.reason = reason;
    c->r.status = 0;
    sl__conn_audit(c);
    sl__conn_close(c);
}

/*
 * Identity and decision.
 */

/* Reads the Proxy-Authorization of `h` into the connection. Returns false when it is
 * present but malformed. */
bool sl__conn_take_credentials(struct sl__conn *c, const struct sl_h1_head *h)
{
    const struct sl_h1_header *f = sl_h1_find(h, "proxy-authorization");

    c->has_auth = false;
    if (f == NULL) {
        return true;
    }
    if (sl_auth_parse_basic(f->value, c->auth_id, sizeof(c->auth_id), c->auth_token,
                            sizeof(c->auth_token))
        < 0) {
        return false;
    }
    c->has_auth = true;
    return true;
}

/* The client of `snap` (NULL: none) that the connection's credentials and address name, or
 * NULL. */
const struct sl_client *sl__conn_identify(const struct sl__conn *c, const struct sl_snapshot *snap)
{
    if (snap == NULL) {
        return NULL;
    }
    if (c->transparent) {
        /* No proxy protocol, no credentials: the address alone (docs/reference/proxy.md
         * §4.12). */
        return sl_policy_identify_address(snap, (const struct sockaddr *)&c->peer);
    }
    return sl_policy_identify(snap, c->has_auth ? c->auth_id : NULL,
                              c->has_auth ? c->auth_token : NULL,
                              (const struct sockaddr *)&c->peer);
}

/* Names the client and environment in the lines of refusals that come before the decision
 * (a malformed request inside a tunnel still belongs to someone, docs/reference/proxy.md §4.7). */
void sl__conn_note_identity(struct sl__conn *c)
{
    const struct sl_client *client = sl__conn_identify(c, c->snap);

    if (client != NULL) {
        c->dec.client = sl_client_id(client);
        c->dec.environment = sl_env_name(sl_client_env(client));
        c->dec.environment_label = sl_env_label(sl_client_env(client));
    }
}

/* Answers the refusal of `c->dec`. A proxy request without Proxy-Authorization is how a client
 * learns that it must send one (git, curl --proxy-anyauth): its 407 is a challenge, not a
 * refusal. A wrong credential, a malformed header, or a 407 inside a tunnel (its client went
 * away) is. */
static void refuse_decision(struct sl__conn *c, bool keep)
{
    int status = sl_reason_status(c->dec.reason);

    c->r.challenge = c->dec.reason == SL_REASON_NO_IDENTITY && !c->has_auth
                     && !sl__conn_in_tunnel(c) && !c->transparent;
    if (c->transparent && status == 407) {
        /* A client that speaks to no proxy has none to authenticate to: its client left the
         * snapshot, and that is a 403 (docs/reference/proxy.md §4.12). */
        status = 403;
    }
    sl__conn_refuse(c, c->dec.reason, status,
                    c->dec.reason == SL_REASON_GIT_READ_ONLY ? GIT_READ_ONLY_DETAIL : NULL, keep);
}

/* Decides the current request (`method` NULL: a CONNECT, host and port only). Returns true
 * when allowed; otherwise answers the refusal. */
bool sl__conn_decide(struct sl__conn *c, const char *method, bool tls, bool keep)
{
    struct sl_request_view v = { &c->r.host, c->r.port, method, tls, c->r.target };
    const struct sl_client *client = sl__conn_identify(c, c->snap);

    sl_policy_decide(c->snap, client, &v, (int64_t)time(NULL), &c->dec);
    if (!c->dec.allow) {
        refuse_decision(c, keep);
        return false;
    }
    /* docs/reference/proxy.md §4.7: nothing leaves that the audit log cannot record, nor while
     * it does not keep up (its lines could be pushed out by the time the request ends). */
    if (!c->w->shared->cfg->audit_failure_allow
        && (!sl_audit_healthy(c->w->shared->audit) || sl_audit_congested(c->w->shared->audit))) {
        c->dec.allow = false;
        c->dec.reason = SL_REASON_AUDIT_UNAVAILABLE;
        sl__conn_refuse_reason(c, SL_REASON_AUDIT_UNAVAILABLE,
                               sl_audit_healthy(c->w->shared->audit)
                                       ? "the audit log does not keep up; requests are refused "
                                         "until it does"
                                       : "the audit log cannot be written; requests are refused "
                                         "until it can",
                               keep);
        return false;
    }
    c->r.credential = c->dec.credential_header != NULL;
    return true;
}

/* The ports a refused CONNECT is opened for, so that the refusal is answered inside: those of
 * https and http, where clients speak TLS or HTTP through a proxy; on any other port the
 * protocol is not known, and the CONNECT's own 403 is the one answer a client can get. */
static bool held_port(uint16_t port)
{
    return port == 443 || port == 80;
}

bool sl__conn_decide_connect(struct sl__conn *c)
{
    struct sl_request_view v = { &c->r.host, c->r.port, NULL, true, NULL };
    const struct sl_client *client = sl__conn_identify(c, c->snap);

    sl_policy_decide(c->snap, client, &v, (int64_t)time(NULL), &c->dec);
    if (c->dec.allow) {
        return true;
    }
    /* pip, git and npm show a CONNECT's status line and nothing of its body: an identified
     * client refused for the host or the port gets its tunnel, and the refusal with its hint
     * as the answer to its first request inside (nothing is dialled). Not a client that must
     * identify itself (407 is what makes it send credentials), nor a host a passthrough rule
     * names (never intercepted). */
    if (c->dec.client != NULL && held_port(c->r.port)
        && (c->dec.reason == SL_REASON_HOST_NOT_ALLOWED
            || (c->dec.reason == SL_REASON_PORT_NOT_ALLOWED && !c->dec.passthrough))) {
        c->held = sl_malloc(sizeof(*c->held));
        if (c->held != NULL) {
            c->held->snap = c->snap != NULL ? sl_snapshot_ref(c->snap) : NULL;
            c->held->dec = c->dec;
            return true;
        }
    }
    if (c->transparent) {
        /* A ClientHello was sent, not a CONNECT: nothing can answer it in HTTP. */
        sl__conn_drop(c, c->dec.reason);
        return false;
    }
    refuse_decision(c, false);
    return false;
}

/* Puts the held refusal's snapshot and decision in place of the current ones. */
static void take_held(struct sl__conn *c)
{
    struct sl__held *h = c->held;

    c->held = NULL;
    sl_snapshot_unref(c->snap);
    c->snap = h->snap;
    c->dec = h->dec;
    sl_free(h);
    c->r.host = c->thost;
    c->r.port = c->tport;
    c->r.has_host = true;
}

void sl__conn_refuse_held(struct sl__conn *c)
{
    take_held(c);
    sl__conn_refuse_reason(c, c->dec.reason, NULL, false);
}

void sl__conn_audit_held(struct sl__conn *c)
{
    if (c->held == NULL) {
        return;
    }
    sl__conn_begin_request(c, "CONNECT");
    take_held(c);
    c->r.scheme = "https";
    c->r.target = NULL;
    c->r.allow = false;
    c->r.reason = c->dec.reason;
    c->r.status = 0;
    sl__conn_audit(c);
}

/* The headers through which many servers (Google's, Microsoft's, frameworks' middleware) take
 * a request's method from its head instead of its request line. */
static const char *const override_headers[] = { "X-HTTP-Method-Override", "X-HTTP-Method",
                                                "X-Method-Override" };

/*
 * A request that names another method in a method-override header is decided for that method
 * too: a rule that allows POST only must not let a "POST" with `X-HTTP-Method-Override: DELETE`
 * through to a server that honours it. The value must be a method token (compared in upper
 * case, as servers read it); anything else is a bad request. Returns true when every method
 * named is allowed; otherwise answers the refusal, naming the header and its method.
 */
bool sl__conn_overrides_allowed(struct sl__conn *c, const struct sl_h1_head *h, bool tls, bool keep)
{
    const struct sl_client *client = NULL;
    bool identified = false;

    for (size_t i = 0; i < h->n_headers; i++) {
        const struct sl_h1_header *f = &h->headers[i];
        const char *name = NULL;
        enum sl_policy_method_fault fault;
        char method[SL_POLICY_METHOD_LEN_MAX + 1];
        char detail[160];
        struct sl_request_view v;
        struct sl_decision d;

        for (size_t k = 0; k < SL_ARRAY_LEN(override_headers) && name == NULL; k++) {
            if (sl_h1_name_is(f->name, override_headers[k])) {
                name = override_headers[k];
            }
        }
        if (name == NULL) {
            continue;
        }
        fault = sl_policy_method_check((const char *)f->value.p, f->value.n);
        if (fault != SL_POLICY_METHOD_OK && fault != SL_POLICY_METHOD_LOWERCASE) {
            (void)snprintf(detail, sizeof(detail), "%s is not a method", name);
            sl__conn_refuse_reason(c, SL_REASON_BAD_REQUEST, detail, false);
            return false;
        }
        for (size_t k = 0; k < f->value.n; k++) {
            method[k] = (char)toupper((unsigned char)f->value.p[k]);
        }
        method[f->value.n] = '\0';
        if (!identified) {
            client = sl__conn_identify(c, c->snap);
            identified = true;
        }
        v = (struct sl_request_view){ &c->r.host, c->r.port, method, tls, c->r.target };
        sl_policy_decide(c->snap, client, &v, (int64_t)time(NULL), &d);
        if (!d.allow) {
            c->dec = d;
            c->r.override_method = sl_arena_strndup(&c->arena, method, f->value.n);
            (void)snprintf(detail, sizeof(detail), "%s names %s", name, method);
            sl__conn_refuse_reason(c, d.reason, detail, keep);
            return false;
        }
    }
    return true;
}

/* A method RFC 9110 §9.2.2 calls idempotent, in any letter case (override headers are read
 * that way). */
static bool idempotent_method(const char *m, size_t n)
{
    static const char *const methods[] = { "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE" };

    for (size_t k = 0; k < SL_ARRAY_LEN(methods); k++) {
        if (strlen(methods[k]) == n && strncasecmp(m, methods[k], n) == 0) {
            return true;
        }
    }
    return false;
}

bool sl__conn_not_idempotent(const struct sl_h1_head *h, char *why, size_t cap)
{
    if (!idempotent_method(h->method, strlen(h->method))) {
        if (cap > 0) {
            (void)snprintf(why, cap, "%s", h->method);
        }
        return true;
    }
    for (size_t i = 0; i < h->n_headers; i++) {
        const struct sl_h1_header *f = &h->headers[i];

        for (size_t k = 0; k < SL_ARRAY_LEN(override_headers); k++) {
            if (sl_h1_name_is(f->name, override_headers[k])
                && !idempotent_method((const char *)f->value.p, f->value.n)) {
                if (cap > 0) {
                    (void)snprintf(why, cap, "%s with %s: %.*s", h->method, override_headers[k],
                                   (int)(f->value.n > 32 ? 32 : f->value.n),
                                   (const char *)f->value.p);
                }
                return true;
            }
        }
    }
    return false;
}

bool sl__conn_idempotent(const struct sl_h1_head *h)
{
    return !sl__conn_not_idempotent(h, NULL, 0);
}

/*
 * Placeholders (policy/placeholder.h): a client's placeholder may be in one place only, its
 * rule's header of a request that rule lets out (the decision's `placeholder`); the policy
 * checked the host and the target, this checks the headers. Only a client with placeholders
 * pays for the scan, one search for the prefix per header value.
 */
bool sl__conn_placeholders_ok(struct sl__conn *c, const struct sl_h1_head *h)
{
    const struct sl_placeholder *own = c->dec.placeholder;
    char detail[200];

    if (c->dec.n_placeholders == 0) {
        return true;
    }
    for (size_t i = 0; i < h->n_headers; i++) {
        const struct sl_h1_header *f = &h->headers[i];
        bool its_header = own != NULL && sl_h1_name_is(f->name, own->header);
        const struct sl_placeholder *ph = sl_placeholder_scan(
                c->dec.placeholders, c->dec.n_placeholders, f->value, its_header ? own : NULL);

        if (ph != NULL) {
            c->dec.allow = false;
            c->dec.reason = SL_REASON_PLACEHOLDER_MISUSE;
            c->dec.misused = ph;
            (void)snprintf(detail, sizeof(detail), "the %.*s header carries the placeholder in %s",
                           (int)(f->name.n < 64 ? f->name.n : 64), (const char *)f->name.p,
                           ph->env);
            sl__conn_refuse_reason(c, SL_REASON_PLACEHOLDER_MISUSE, detail, false);
            return false;
        }
    }
    return true;
}
