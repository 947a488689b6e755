/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/snapshot.h - the policy snapshot (docs/reference/snapshot.md §3): parsed, validated,
 * compiled, immutable.
 *
 * Lifecycle: sl_snapshot_parse() on the main thread returns a new reference -> the pointer is
 * handed to every worker, each taking its own sl_snapshot_ref() -> workers read it without
 * locks -> each holder calls sl_snapshot_unref(); the last one frees it. Counts are atomic, so
 * ref and unref may run on any thread. Nothing in a snapshot changes after parse returns, so
 * every const pointer obtained from it (environments, clients, strings) stays valid, on any
 * thread, for as long as the caller holds a reference.
 *
 * The document (every rule below is checked; a violation is an error with its JSON path):
 *
 *   { "version": N, "environments": { NAME: ENV, ... }, "clients": [ CLIENT, ... ] }
 *
 *   - Unknown fields are errors everywhere: a typo in a security policy must not be ignored.
 *   - `version`: required, an integer >= 1 (7.0 is not an integer).
 *   - `environments`: required object, at most 4096 members. NAME: 1-128 characters of
 *     [A-Za-z0-9._-].
 *   - ENV: { "default": "deny"|"allow" (required), "rules": [ RULE, ... ] (optional, absent =
 *     empty), "label": optional, "observe_until": optional RFC 3339 date-time (until then a
 *     refusal for the host, port or methods is an allow marked "observed", policy/decision.h) }.
 *     At most 100 rules and at most 100 credentials.
 *   - RULE: { "host": required, "methods": optional, "credential": optional, "tls":
 *     optional }.
 *       host: `pattern[:port]`. The pattern is normalised as request hosts are (policy/host.h):
 *         lowercased, trailing dot removed, IPv4 spellings canonicalised, IPv6 in brackets; '*'
 *         is allowed in DNS patterns and matches any run of characters, dots included, the
 *         empty run too; IP-literal patterns have no '*'. At most 253 characters without the
 *         port. The port, when present, is 1-65535 without leading zeros.
 *       methods: array of 0-32 distinct method tokens (RFC 9110 §9.1: tchar, at most 32
 *         characters). Methods are case-sensitive, so a token with a lowercase letter is an
 *         error (with a hint naming the uppercase form). Empty or absent = every method.
 *       credential: { "header": NAME, "value": VALUE, "placeholder_env": VAR }, header and
 *         value required. VAR, when given, makes it a placeholder credential
 *         (policy/placeholder.h): a shell identifier of 1-128 characters, unique among the
 *         credentials of one rule list; then VALUE is what the placeholder stands for, replaced
 *         in the NAME header, never injected. NAME: an RFC 9110
 *         token of at most 128 characters, and none of the framing, hop-by-hop or routing
 *         headers (Host, Content-Length, Transfer-Encoding, Connection, Proxy-Connection,
 *         Keep-Alive, TE, Trailer, Upgrade, Proxy-Authorization, Proxy-Authenticate), compared
 *         case-insensitively. VALUE: 1-8192 bytes, no control characters but HTAB (so never
 *         CR, LF, NUL or DEL), not starting or ending with a space or tab.
 *       tls: "intercept" (the default: the tunnel's TLS is terminated and every request inside
 *         is decided) or "passthrough" (for certificate-pinned clients: the tunnel is relayed
 *         uninspected once its ClientHello's SNI agrees with the CONNECT host). A passthrough
 *         rule sees no request, so non-empty `methods` or a `credential` with it is an error
 *         (reported at the path of `methods` / `credential`).
 *   - `clients`: optional array, at most 65536 entries. CLIENT:
 *       id: required, unique, 1-128 characters of [A-Za-z0-9._-] (no ':' because of Basic auth).
 *       environment: required, the name of an environment of this document.
 *       token: 1-256 visible ASCII characters (0x21-0x7e).
 *       ip: an IPv4 dotted quad or a bare IPv6 address, as inet_pton() reads them.
 *       cidr: `ADDR/LEN`, IPv4 (LEN 0-32) or IPv6 (LEN 0-128). Host bits must be zero
 *         (`10.0.0.1/8` is an error that names `10.0.0.0/8`): a typo in a range should not
 *         silently widen or move it.
 *       At least one of token, ip, cidr is required: a client nothing identifies is an error.
 *       expires_at: RFC 3339 date-time (`2026-11-30T23:00:00Z`, `...T23:00:00.5+02:00`);
 *         'T' and 'Z' in either case; fractional seconds are truncated; second 60 is allowed.
 *       rules: RULE array as in an environment, with the same limits per client.
 *       git: the client's git access (policy/git.h): { "host": required, a host[:port] as a
 *         rule's but without '*' (port 443 when absent); "base_path": "" (the default) or
 *         "/seg..." of unreserved characters, no "." / ".." segment, no trailing '/', at most
 *         255 bytes; "repo": required, 1-8 segments of [A-Za-z0-9._-], none "." or "..", at
 *         most 255 bytes; "access": required, "read" or "write"; "credential": required, as a
 *         rule's; "default_branch": required, a branch name (git's check-ref-format rules, no
 *         '*'), 1-255 bytes; "protected_branches": optional, at most 32 globs over branch
 *         names, each like a branch name but '*' allowed }.
 *       placeholders: { VAR: PLACEHOLDER, ... }, at most 200: each VAR the placeholder_env of
 *         a credential of the client's own rules or (not both) of its environment's; each
 *         PLACEHOLDER "sluice-ph-" and 40 characters of [a-z2-7], distinct within the client.
 *
 * The raw bytes are kept, so that sl_snapshot_is_identical() can tell a byte-identical re-push
 * (docs/reference/snapshot.md §3 `version`).
 */
#ifndef SL_POLICY_SNAPSHOT_H
#define SL_POLICY_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/errlist.h"

/* Limits of docs/reference/snapshot.md §3, and the ones this implementation adds. */
#define SL_SNAPSHOT_MAX_BYTES     ((size_t)64 << 20)
#define SL_SNAPSHOT_MAX_DEPTH     16
#define SL_POLICY_ENVS_MAX        4096
#define SL_POLICY_CLIENTS_MAX     65536
#define SL_POLICY_RULES_MAX       100
#define SL_POLICY_CREDENTIALS_MAX 100
#define SL_POLICY_METHODS_MAX     32
#define SL_POLICY_METHOD_LEN_MAX  32
#define SL_POLICY_NAME_MAX        128
#define SL_POLICY_LABEL_MAX       512
#define SL_POLICY_HEADER_MAX      128
#define SL_POLICY_VALUE_MAX       8192

/* At most this many errors are reported; `truncated` says there were more. */
#define SL_POLICY_ERRORS_MAX 100
/* Sizes of an error's path and message, terminators included; longer texts are cut. */
#define SL_POLICY_PATH_MAX    SL_ERRLIST_PATH_MAX
#define SL_POLICY_MESSAGE_MAX SL_ERRLIST_MESSAGE_MAX

struct sl_snapshot; /* opaque, refcounted, immutable */
struct sl_env;      /* opaque, owned by its snapshot */
struct sl_client;   /* opaque, owned by its snapshot */
struct sl_git;      /* opaque, owned by its snapshot (policy/git.h) */

/* The errors of one parse, in document order (a base/errlist list). Caller storage; zero it or
 * let sl_snapshot_parse() fill it, then release with sl_policy_errors_finish(). */
struct sl_policy_errors {
    /* `count` errors, owned (heap). NULL when count == 0. Each is where
     * (`$.environments.ci.rules[3].host`) and what; neither text ever contains a credential
     * value or a token. */
    struct sl_errlist_item *items;
    size_t count;
    /* True when more than SL_POLICY_ERRORS_MAX errors were found. */
    bool truncated;
};

/* Frees the items and zeroes `e`. A zeroed `e` is fine. */
void sl_policy_errors_finish(struct sl_policy_errors *e);

/* Parses, validates and compiles `n` bytes of JSON (borrowed; copied). Every error found, up to
 * SL_POLICY_ERRORS_MAX, is appended to `errs` (which the function first resets); `errs` may be
 * NULL when only the verdict matters. Returns:
 *   0            `*out` is a new reference to the snapshot;
 *   SL_EPOLICY   the document is invalid (at least one error in `errs`);
 *   SL_ENOMEM    memory ran out (`errs` may hold the errors found until then).
 * On failure `*out` is NULL. Routes jansson's allocations through base/mem (process-wide,
 * once), so allocation-failure tests cover jansson too. Main thread only in practice: it may
 * take milliseconds for a large document, but it is thread-safe. */
SL_MUST_CHECK int sl_snapshot_parse(const void *json, size_t n, struct sl_snapshot **out,
                                    struct sl_policy_errors *errs);

/* sl_snapshot_parse(), and the warnings too, in `warns` (reset first; NULL: none wanted): what
 * the document says that is valid but perhaps not what its author meant, each with its path,
 * such as a host pattern written in upper case or with a trailing dot (it is matched in its
 * normal form, docs/reference/snapshot.md §3). Warnings never make a document invalid. */
SL_MUST_CHECK int sl_snapshot_parse_warn(const void *json, size_t n, struct sl_snapshot **out,
                                         struct sl_policy_errors *errs,
                                         struct sl_policy_errors *warns);

/* Takes one more reference. Returns `s` for convenience. Thread-safe. */
struct sl_snapshot *sl_snapshot_ref(struct sl_snapshot *s);

/* Drops one reference; frees the snapshot with the last one. NULL is a no-op. Thread-safe. */
void sl_snapshot_unref(struct sl_snapshot *s);

/* The document's `version` (>= 1). */
int64_t sl_snapshot_version(const struct sl_snapshot *s);

/* True when `json` is byte for byte the document `s` was parsed from. */
bool sl_snapshot_is_identical(const struct sl_snapshot *s, const void *json, size_t n);

/* Counts for summaries: environments, clients, rules (of environments and clients together),
 * credentials (likewise). */
size_t sl_snapshot_env_count(const struct sl_snapshot *s);
size_t sl_snapshot_client_count(const struct sl_snapshot *s);
size_t sl_snapshot_rule_count(const struct sl_snapshot *s);
size_t sl_snapshot_credential_count(const struct sl_snapshot *s);

/* The environment named `name` (case-sensitive), or NULL. Borrowed from `s`. O(1). */
const struct sl_env *sl_snapshot_find_env(const struct sl_snapshot *s, const char *name);

/* The client whose id is `id` (case-sensitive), or NULL. Borrowed from `s`. O(1). The proxy
 * uses it to carry a connection over to a newer snapshot; a client that authenticated with a
 * token must then be checked again with sl_policy_identify() (its token may have changed). */
const struct sl_client *sl_snapshot_find_client(const struct sl_snapshot *s, const char *id);

/* An environment's name (its key in the snapshot). Borrowed. */
const char *sl_env_name(const struct sl_env *e);

/* Whether `s` (n bytes) may be an environment's "label": 1-SL_POLICY_LABEL_MAX bytes, no control
 * characters (it goes into response bodies). */
bool sl_policy_label_ok(const char *s, size_t n);

/* What people are shown as the environment in refusals and hints: its "label" when the
 * snapshot gives one (the control plane keys environments by id and labels them with their
 * names), else its name. Borrowed. */
const char *sl_env_label(const struct sl_env *e);

/* True when the environment's `default` is `allow`. */
bool sl_env_default_allows(const struct sl_env *e);

/* A client's id. Borrowed. */
const char *sl_client_id(const struct sl_client *c);

/* A client's environment. Borrowed. Never NULL. */
const struct sl_env *sl_client_env(const struct sl_client *c);

/* True when the client has an `expires_at`; then `*at_s` is it in seconds since the epoch. */
bool sl_client_expiry(const struct sl_client *c, int64_t *at_s);

/* True when the client is identified by a token (its Proxy-Authorization must carry it). */
bool sl_client_has_token(const struct sl_client *c);

/* The client's git access (policy/git.h), NULL when it has none. Borrowed. */
const struct sl_git *sl_client_git(const struct sl_client *c);

#endif
