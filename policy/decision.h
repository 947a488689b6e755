/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/decision.h - who is asking (identity) and may this request leave (decision).
 *
 * Both functions are the proxy's hot path: they read an immutable snapshot, take no locks,
 * allocate nothing and do no I/O. Their cost does not grow with the number of environments,
 * clients or rules, except for the short list of general glob patterns (`api-*.example.com`,
 * `*`) of the one environment and client concerned; exact hosts and `*.suffix` patterns are
 * found through hash tables, the latter by walking the request host's label boundaries.
 *
 * Rule choice (docs/reference/snapshot.md §3): among the rules whose host pattern matches the
 * request host and whose port covers the request port (a rule without a port covers 443 and 80;
 * with a port, that port only), the most specific wins:
 *   1. an exact host (or IP literal) beats every pattern with a '*';
 *   2. among patterns, the longer literal suffix (the text after the last '*') wins
 *      (`*.api.github.com` beats `*.github.com`, which ties with `x-*.github.com`);
 *   3. then the longer pattern (`x-*.github.com` beats `*.github.com`);
 *   4. then the earlier rule, a client's runtime rules coming before its environment's.
 * The request is allowed when the winning rule's methods include the method (no methods = all).
 * A less specific rule never rescues a method the winner refused. IP-literal request hosts only
 * ever match IP-literal rules, literally; DNS names never match IP rules.
 */
#ifndef SL_POLICY_DECISION_H
#define SL_POLICY_DECISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/err.h"
#include "policy/git.h"
#include "policy/host.h"
#include "policy/placeholder.h"
#include "policy/snapshot.h"

/* Why a request was refused: every reason code of docs/reference/proxy.md §4.5 (the proxy uses the
 * ones the policy does not decide itself). SL_REASON_NONE is the reason of an allowed request. */
enum sl_reason {
    SL_REASON_NONE = 0,
    SL_REASON_NO_POLICY,
    SL_REASON_NO_IDENTITY,
    SL_REASON_EXPIRED,
    SL_REASON_BAD_REQUEST,
    SL_REASON_BAD_HOST,
    SL_REASON_HOST_NOT_ALLOWED,
    SL_REASON_PORT_NOT_ALLOWED,
    SL_REASON_METHOD_NOT_ALLOWED,
    SL_REASON_CREDENTIAL_NEEDS_TLS,
    SL_REASON_HOST_MISMATCH,
    SL_REASON_PRIVATE_ADDRESS,
    SL_REASON_NOT_TLS,
    SL_REASON_DNS,
    SL_REASON_UPSTREAM_UNREACHABLE,
    SL_REASON_UPSTREAM_TLS,
    SL_REASON_UPSTREAM_TIMEOUT,
    SL_REASON_TOO_LARGE,
    SL_REASON_OVERLOADED,
    SL_REASON_AUDIT_UNAVAILABLE,
    /* The git reasons of docs/reference/proxy.md §4.11. */
    SL_REASON_GIT_READ_ONLY,
    SL_REASON_GIT_PROTECTED_BRANCH,
    SL_REASON_GIT_BAD_PUSH,
    /* A client's placeholder (policy/placeholder.h) anywhere but in its rule's header of a
     * request its rule lets out: another host, another header, the target, the host name. */
    SL_REASON_PLACEHOLDER_MISUSE,
    /* The upstream closed (or reset) its connection before any byte of its response, and the
     * request was not sent again (docs/reference/proxy.md §4.4, Pooling). */
    SL_REASON_UPSTREAM_CLOSED,
    /* The client's source address holds --max-connections-per-client connections already. */
    SL_REASON_CLIENT_OVERLOADED,
    /* The proxy could not allocate what the request needs (its upstream head, a held push's
     * state): a failure of the proxy's, not of the request. */
    SL_REASON_OUT_OF_MEMORY,
};

/* The last reason code: counters and tables indexed by reason have SL_REASON_LAST + 1 entries. */
#define SL_REASON_LAST SL_REASON_OUT_OF_MEMORY

/* The code of docs/reference/proxy.md §4.5 (`method-not-allowed`); "none" for SL_REASON_NONE (the
 * audit log writes null for it). Static, never NULL. */
const char *sl_reason_code(enum sl_reason r);

/* The HTTP status of docs/reference/proxy.md §4.5 for a refusal with this reason: 407 identity, 403
 * policy (git-read-only, and git-protected-branch when it cannot be answered with a receive-pack
 * result), 400 malformed (not-tls and git-bad-push too), 421 mismatch, 431 too large, 502/504
 * upstream, 503 no policy, overloaded (client-overloaded), out of memory or audit unavailable; 200
 * for SL_REASON_NONE. */
int sl_reason_status(enum sl_reason r);

/* A buffer of this size holds every hint of sl_policy_hint(). */
#define SL_POLICY_HINT_MAX 2048

/* What the decision looks at. Everything borrowed for the duration of the call. */
struct sl_request_view {
    /* The request host in normal form (sl_host_normalize(), sl_host_parse_authority() or
     * sl_url_parse() made it). */
    const struct sl_host *host;
    /* The port the request goes to, 1-65535. */
    uint16_t port;
    /* The method, NUL-terminated, compared case-sensitively ("GET"); NULL for a CONNECT
     * tunnel, which is decided on host and port alone (its requests are each decided with
     * their method later): allowed when a rule matches whatever its methods, and never
     * with a credential. */
    const char *method;
    /* True for a request inside an intercepted TLS tunnel, false for plain HTTP. */
    bool tls;
    /* The origin-form request target (path and query), NUL-terminated, which a client's `git`
     * object looks at (policy/git.h); NULL when there is none (a CONNECT, a relay decided
     * again): then no git credential applies. */
    const char *target;
};

/* The verdict. Every pointer is borrowed from the snapshot passed to sl_policy_decide() and
 * valid while the caller holds a reference to it. */
struct sl_decision {
    bool allow;
    /* SL_REASON_NONE when allowed. */
    enum sl_reason reason;
    /* The winning rule's host as normalised, with `:port` when it has one; NULL when no rule
     * matched (host-not-allowed, port-not-allowed, an allow by default, or no identity). */
    const char *rule;
    /* The header to inject and its value: set only when the request is allowed through a rule
     * with a credential, NULL otherwise. The value is a secret: never log or print it. */
    const char *credential_header;
    const char *credential_value;
    /* True when the winning rule has a credential, allowed or not (for explanations). */
    bool rule_has_credential;
    /* True when the winning rule says `"tls": "passthrough"`, allowed or not. An allowed
     * CONNECT with it is relayed uninspected (no interception, no request decided inside). For a
     * port-not-allowed refusal (no winner): some rule naming the host is a passthrough rule, so
     * the host is not to be intercepted, whatever the port. */
    bool passthrough;
    /* The request goes to the client's git host (its `git` object's host and port, method
     * given): there the git object decides the credential, never a rule (policy/git.h). */
    bool git_host;
    /* On the git host: what the target is for the client's repository, whatever the method
     * (SL_GIT_PATH_NONE elsewhere). */
    enum sl_git_path git_path;
    /* The credential to inject is the client's git credential (an own-repository path, its
     * method, over TLS). */
    bool git_credential;
    /* An allowed `POST .../git-receive-pack` under write access: before any byte of it leaves,
     * the proxy reads the push's ref-update commands and refuses the push when one of them
     * names the default or a protected branch (sl_git_ref_is_protected()). Borrowed from the
     * snapshot; NULL otherwise. */
    const struct sl_git *git_push;
    /* The environment is in observe (its `observe_until` is after now) and the request was let
     * out, without a credential, although the policy refuses it for its host, port or method:
     * `would_deny` is that refusal (host-, port- or method-not-allowed; SL_REASON_NONE
     * otherwise). `rule` stays the winner that refused a method. */
    bool observed;
    enum sl_reason would_deny;
    /* The client's placeholders (policy/placeholder.h), borrowed from the snapshot, for the
     * scan of the request's headers: none allowed anywhere but `placeholder` in its header.
     * NULL (and 0) when the client has none. */
    const struct sl_placeholder *placeholders;
    uint32_t n_placeholders;
    /* Allowed over TLS through a rule whose credential has a `placeholder_env` the client has a
     * placeholder for: that placeholder, to be replaced by its secret in its header
     * (sl_placeholder_replace()); nothing is injected then (credential_header is NULL). NULL
     * otherwise. */
    const struct sl_placeholder *placeholder;
    /* placeholder-misuse: the placeholder found where it may not be (the host name, the
     * target, or, set by the proxy, a header). */
    const struct sl_placeholder *misused;
    /* The client's id and environment's name; NULL when there is no client. */
    const char *client;
    const char *environment;
    /* What refusals and hints call the environment (sl_env_label()); NULL with no client. */
    const char *environment_label;
    /* For sl_policy_hint(): the winner is an exact-host rule / a client's runtime rule, and
     * its methods. */
    bool _rule_exact;
    bool _rule_of_client;
    /* A method-not-allowed for the winner's methods (what observe lets out), not for TRACE. */
    bool _by_methods;
    /* The winner's credential is a placeholder one, for this variable. */
    const char *_placeholder_env;
    const char *const *_rule_methods;
    uint32_t _rule_n_methods;
};

/* Which client is this (docs/reference/snapshot.md §3 clients, docs/reference/proxy.md §4.2)? `id`
 * and `token` are the parts of the request's Proxy-Authorization (sl_auth_parse_basic()), both NULL
 * when it had none; `src` is the source address (AF_INET or AF_INET6; an IPv4-mapped IPv6 address
 * counts as the IPv4 address; NULL when unknown, the port is ignored).
 *   - With credentials: the client with that id, if it has a token, the token is equal
 *     (compared in constant time) and its ip/cidr, when given, hold for `src`. Anything else
 *     gives NULL: a wrong or unknown token never falls back to address matching (it is a 407).
 *   - Without credentials: among the clients without a token, the first (in document order)
 *     whose `ip` equals `src` (and whose `cidr`, when also given, holds); else the one with the
 *     longest `cidr` that holds, ties by order.
 * Returns the client, borrowed from `s`, or NULL for none. The expiry is not looked at here
 * (it is per request: sl_policy_decide()). Allocates nothing. */
const struct sl_client *sl_policy_identify(const struct sl_snapshot *s, const char *id,
                                           const char *token, const struct sockaddr *src);

/* Which client is this, by its source address alone (docs/reference/snapshot.md §3 "Identity":
 * a transparent connection or a DNS query, which carry no Proxy-Authorization)? The first client
 * in document order whose `ip` equals `src` (and whose `cidr`, when it also has one, holds),
 * token clients included: a sandbox's entry has both its token and its address on the sandbox
 * network, and here the address is all there is. Else the client without a token (and without
 * an `ip`) with the longest `cidr` that holds, ties by order; a token client with a `cidr` but
 * no `ip` is never found this way (a range is no identity for its token). Returns the client,
 * borrowed from `s`, or NULL (no snapshot, no source, an unknown family). Allocates nothing. */
const struct sl_client *sl_policy_identify_address(const struct sl_snapshot *s,
                                                   const struct sockaddr *src);

/* Decides `req` for client `c` (from sl_policy_identify() on the same snapshot) at `now_s`
 * (seconds since the epoch) and fills `*out` completely. In order:
 *   no snapshot -> no-policy; no client -> no-identity; expires_at <= now -> expired;
 *   no host in `req` -> bad-request (the caller's bug, but never an allow);
 *   one of the client's placeholders in the host name or the target -> placeholder-misuse;
 *   winning rule (see top of file): method not in its methods -> method-not-allowed; TRACE on
 *   a rule with a credential -> method-not-allowed; a credential over plain HTTP ->
 *   credential-needs-tls; else allowed (with the credential to inject, if any). With no
 *   method (a CONNECT) the winner's methods and credential are not looked at: allowed,
 *   never with a credential (`passthrough` tells the proxy how to carry the tunnel); a plain
 *   HTTP request (`tls` false) whose winner is a passthrough rule -> not-tls: passthrough is
 *   for TLS, and relaying plain HTTP uninspected, or inspecting what the rule says must not be
 *   inspected, would both break the rule's promise (a request inside an intercepted tunnel,
 *   `tls` true, whose winner is a passthrough rule is allowed like one under a rule without
 *   methods: only a tunnel opened under an older snapshot gets there);
 *   no winner: the environment's default `allow` -> allowed without credential; else
 *   port-not-allowed when some rule's host pattern matched, else host-not-allowed.
 * On the client's git host (docs/reference/snapshot.md §3 `git`), a rule's credential is never
 * injected (nor refused for: its TRACE and plain-HTTP checks do not apply); an allowed request
 * then goes on through the git object: a target that is not an own-repository path
 * (sl_git_path_of()) is allowed without credential; on one, TRACE -> method-not-allowed; a
 * method the path does not take (info/refs: GET; the services: POST; LFS: any) -> allowed
 * without credential; plain HTTP -> credential-needs-tls; access "read" and a write
 * (info/refs for git-receive-pack, POST git-receive-pack, an LFS request other than GET, HEAD
 * and POST .../info/lfs/objects/batch) -> git-read-only; else allowed with the git credential,
 * and `git_push` set for a POST git-receive-pack.
 * Observe: while the client's environment has an `observe_until` after `now_s`, a refusal for
 * the host (host-not-allowed), the port (port-not-allowed) or the winner's methods
 * (method-not-allowed, not TRACE through a credential) becomes an allow without credential nor
 * git credential, intercepted (never passthrough), with `observed` and `would_deny` set.
 * Placeholders: an allow over TLS through a rule whose credential has a `placeholder_env`
 * injects nothing and sets `placeholder` to the client's placeholder for that variable (none
 * when the client has no such placeholder); `placeholders` is set for every decision of a client
 * that has some.
 * Allocates nothing; never fails. */
void sl_policy_decide(const struct sl_snapshot *s, const struct sl_client *c,
                      const struct sl_request_view *req, int64_t now_s, struct sl_decision *out);

/* Writes what would let a refused request through (docs/reference/proxy.md §4.5) into `buf`,
 * NUL-terminated: to allow it, add {"host":"api.github.com","methods":["POST"]} to environment
 * ci-python The suggested rule is the narrowest that works: the request's exact host (with its port
 * unless 80/443) and method. When a wildcard rule refused the method, its methods are kept in
 * the suggestion (`["GET","HEAD","POST"]`), since the new exact rule will outrank it for this
 * host. When an exact-host rule refused the method, a new rule would tie and lose on order, so
 * the hint says to add the method to that rule instead. Only host-, port-, method-not-allowed,
 * credential-needs-tls, placeholder-misuse (where the placeholder is replaced) and the not-tls
 * of a plain HTTP request under a passthrough rule have hints. Returns the length written, 0 when
 * there is no hint (buf is then ""), or SL_ETOOBIG when `cap` is too small (buf then holds "" if
 * cap > 0). SL_POLICY_HINT_MAX is always enough. */
SL_MUST_CHECK int sl_policy_hint(const struct sl_decision *d, const struct sl_request_view *req,
                                 char *buf, size_t cap);

#endif
