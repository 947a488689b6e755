/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/env/snapshot.h - the snapshot compiler: builds the policy document of
 * docs/reference/snapshot.md §3, which the pusher (control/env/pusher) sends to every proxy, from
 * the database.
 *
 * What goes in:
 *   - every environment, keyed by its id (a UUID), never by its name: names are unique only
 *     within a scope and owner (alice's "ci" and the global "ci" are two environments), while
 *     a snapshot's keys must be unique. A UUID fits the proxy's NAME grammar ([A-Za-z0-9._-]).
 *     Client entries name their environment by the same id. The proxy's audit log and its
 *     denial hints therefore show environment ids; the control plane maps them back to names.
 *   - an environment's `default` and rules from its stored egress_json (control/env/environment.h):
 *     host and methods as stored (already in normal form), and the credential's {header,
 *     value, placeholder_env} with the value opened with the secrets key; its `observe_until`
 *     while that is in the future (learn mode). An environment with the network off
 *     becomes {"default":"deny","rules":[]}: nothing leaves it except a client's runtime rules,
 *     and it is never in observe.
 *   - every static client (docs/reference/api.md §5.1b) with its id, environment, ip, cidr and
 * opened token.
 *   - the caller's extra clients (struct sl_snapshot_build_client). This is where sandbox
 *     clients come in: the sandbox code lists its running sandboxes, fills one entry each
 *     (id, environment id, token, ip, expiry, runtime rules such as the git host's, and the
 *     `git` object of its repository) and passes the array to
 *     sl_control_snapshot_build_with_clients(). They follow the static clients in the document.
 *
 * Revocation never fails open: one damaged row must not keep the proxies on an older snapshot
 * that still holds what was revoked since. So when the proxy's parser refuses the compiled
 * document, the build compiles it again with every environment and every client checked on its
 * own as it is compiled, and one the proxy would refuse is replaced (an environment, by
 * deny-all) or left out (a client), reported, while the rest of the snapshot is built and
 * pushed. (Sound rows, the usual case, need only the one check of the whole document: a part the
 * whole takes is one the parser takes on its own, since the whole adds only checks across parts.
 * Checking each part of every build cost about 150 µs per client, 1.5 s at 10 000 clients.)
 *
 * What is left out, never half-compiled and never replaced by a plaintext fallback:
 *   - a rule whose credential value does not open (the key changed, the text is damaged): the
 *     whole rule goes, so a credential is never injected empty or missing. Note that another,
 *     less specific rule of the environment (or its `allow` default) may then let the host out
 *     without the credential, which is what an unchanged environment without that rule does;
 *   - a static client whose token does not open: it can no longer be identified;
 *   - the rules of an environment whose stored egress_json is damaged (not the shape
 *     control/env/environment writes, or the network is on without one), or which the proxy's
 *     parser refuses (a host, a method, a header that is not what the API stored): it is
 *     compiled as {"default":"deny","rules":[]}, failing closed, while the rest of the policy
 *     (in particular a revoked client) still reaches the proxy;
 *   - a client (static or extra) that the proxy's parser refuses on its own (a damaged address
 *     or block): left out;
 *   - the git access of an extra client whose caller says it has a problem (`problem`).
 * Each of these is logged (warn for a value that does not open, error for damage) with the
 * environment's id and name and the rule's host or the client's id, never a value, and
 * listed in the report.
 *
 * The finished document is parsed with the proxy's own parser (sl_snapshot_parse) before it
 * is returned: a snapshot that the proxy would refuse is never produced; the build fails with
 * the parser's errors logged instead.
 *
 * Threads: blocks on the store (a thread-pool job, never a loop thread), like control/store.
 * The document holds credentials and tokens in plaintext: send it, never log it.
 */
#ifndef SL_CONTROL_ENV_SNAPSHOT_H
#define SL_CONTROL_ENV_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"
#include "control/store/model.h"
#include "control/store/secrets.h"
#include "control/store/store.h"

/* The environment key of "no egress at all": an extra client whose env_id is this, or names an
 * environment that no longer exists, is compiled with {"default":"deny","rules":[]} under this
 * key (added to the document only when used; it cannot collide with an environment id, which
 * is a UUID). */
#define SL_SNAPSHOT_OFFLINE_ENV "sluice.offline"

/* A runtime rule of an extra client (docs/reference/snapshot.md §3 client `rules`). Every pointer
 * is borrowed. */
struct sl_snapshot_build_rule {
    /* `pattern[:port]`, in normal form (policy/host.h). Required. */
    const char *host;
    /* `n_methods` uppercase method tokens; none = every method. */
    const char *const *methods;
    size_t n_methods;
    /* The credential to inject: both NULL for none, both set otherwise. */
    const char *header;
    const char *value;
};

/* The git access of an extra client (docs/reference/snapshot.md §3 `git`): the credential the
 * proxy puts on requests to the client's own repository on the git host, and the branches it
 * may not push to. Every pointer is borrowed. */
struct sl_snapshot_build_git {
    /* HOST[:PORT] of the git platform, in normal form. */
    const char *host;
    /* The path prefix of the platform's URL, "" when none. */
    const char *base_path;
    /* `owner/name`. */
    const char *repo;
    /* "read" or "write". */
    const char *access;
    const char *header;
    const char *value;
    const char *default_branch;
    const char *const *protected_branches;
    size_t n_protected;
};

/* A placeholder of an extra client (docs/reference/snapshot.md §3 `placeholders`). Borrowed. */
struct sl_snapshot_build_placeholder {
    /* The variable, the placeholder_env of a credential of the client's environment. */
    const char *env;
    /* The placeholder (policy/placeholder.h shape). */
    const char *value;
};

/* An extra client entry supplied by the caller (the sandbox code). Every pointer is borrowed
 * for the duration of the call. */
struct sl_snapshot_build_client {
    /* Unique across static and extra clients; [A-Za-z0-9._-], 1-128 characters. Required. */
    const char *id;
    /* The environment's id (struct sl_env_row id). Required; it must exist. */
    const char *env_id;
    /* Plaintext token, ip, CIDR block and RFC 3339 expiry; NULL when absent. At least one of
     * token, ip and cidr is required (the proxy's rule). */
    const char *token;
    const char *ip;
    const char *cidr;
    const char *expires_at;
    /* `n_rules` runtime rules, ahead of the environment's for this client alone. */
    const struct sl_snapshot_build_rule *rules;
    size_t n_rules;
    /* Its git access; NULL for none. */
    const struct sl_snapshot_build_git *git;
    /* Its placeholders. Only those whose variable is the placeholder_env of a credential its
     * environment compiles to go in (the environment may have changed since the sandbox got
     * them, or a credential may not open): the others stand for nothing now. */
    const struct sl_snapshot_build_placeholder *placeholders;
    size_t n_placeholders;
    /* Why the client has no git access although it should (its repository's record is
     * damaged): reported as SL_SNAPSHOT_DROP_GIT. NULL when nothing is wrong. */
    const char *problem;
};

/* Why something was left out of a snapshot. */
enum sl_snapshot_drop_kind {
    /* A rule whose credential value does not open. `subject` is the rule's host. */
    SL_SNAPSHOT_DROP_RULE = 0,
    /* A static client whose token does not open. `subject` is the client's id. */
    SL_SNAPSHOT_DROP_CLIENT,
    /* An environment whose stored egress is damaged: compiled as deny with no rules.
     * `subject` is NULL. */
    SL_SNAPSHOT_DROP_EGRESS,
    /* An environment the proxy's parser refuses: compiled as deny with no rules. `subject` is
     * NULL, `message` the parser's first error. */
    SL_SNAPSHOT_DROP_ENV_INVALID,
    /* A client the proxy's parser refuses: left out. `subject` is its id, `message` the
     * parser's first error. */
    SL_SNAPSHOT_DROP_CLIENT_INVALID,
    /* An extra client without the git access it should have: `subject` is its id, `message`
     * the caller's `problem`. */
    SL_SNAPSHOT_DROP_GIT,
};

/* One thing left out. */
struct sl_snapshot_drop {
    enum sl_snapshot_drop_kind kind;
    /* The environment concerned (for a client: its environment). */
    char env_id[SL_UUID_LEN + 1];
    /* Its name (for people; not unique). Owned. */
    char *env_name;
    /* See the kind. Owned; NULL for SL_SNAPSHOT_DROP_EGRESS and SL_SNAPSHOT_DROP_ENV_INVALID. */
    char *subject;
    /* See the kind. Owned; NULL for the others. Never a value or a token. */
    char *message;
};

/* A set of TCP ports, one bit each: bit p % 8 of byte p / 8 is port p (port 0 never set). */
#define SL_SNAPSHOT_PORT_SET_BYTES (65536u / 8u)

/* What a build produced. Caller storage: zero it before its first use; each build frees what
 * a previous one left and fills it anew. Release with sl_snapshot_build_report_finish(). */
struct sl_snapshot_build_report {
    /* What the document holds: environments, clients (static and extra), rules of
     * environments and of clients, credentials of both. */
    size_t n_envs;
    size_t n_clients;
    size_t n_rules;
    size_t n_credentials;
    /* The ports the document's rules (of environments and of clients) name explicitly,
     * `host:PORT` (docs/reference/snapshot.md §3); a rule without a port names none (it covers
     * 443 and 80). The host's firewall redirects these to the proxy's transparent listener
     * (docs/reference/containers.md §5.4). */
    uint8_t named_ports[SL_SNAPSHOT_PORT_SET_BYTES];
    /* The earliest `observe_until` after the build's time among the environments compiled
     * (Unix seconds), 0 when none is in observe: the control plane builds again then. */
    int64_t next_observe_end;
    /* `n_drops` things left out, in document order. Owned; NULL when none. */
    struct sl_snapshot_drop *drops;
    size_t n_drops;
};

/* Frees the drops and zeroes the report. A zeroed report is fine. */
void sl_snapshot_build_report_finish(struct sl_snapshot_build_report *r);

/* The drops for people (GET /api/v1/status `snapshot.problems`): a new array of
 * {"environment","name","message"} (and "client" for a client), in report order; NULL when out
 * of memory. */
json_t *sl_snapshot_build_report_problems(const struct sl_snapshot_build_report *r);

/*
 * Builds the snapshot with `version` (>= 1, normally sl_store_next_snapshot_version()) from
 * every environment and static client in `st`, opening values with `sec` (both borrowed).
 * `out` (caller's buffer; its cap bounds the document, SL_SNAPSHOT_MAX_BYTES is the proxy's)
 * is reset and receives the document: compact JSON, members in the order of
 * docs/reference/snapshot.md §3. `report` may be NULL. Returns: 0             `out` holds a
 * document sl_snapshot_parse() accepts; SL_EINVAL     `version` < 1; SL_ETOOBIG    the database
 * holds more than the proxy accepts (over 4096 environments, 65536 clients, or 100 rules or 100
 * credentials in one environment: the API refuses these, so the database was changed behind its
 * back), or the document would pass `out`'s cap; logged, naming the environment; SL_EPOLICY    the
 * document failed the proxy's validation (the errors are logged: paths and messages, never values);
 *   SL_ENOMEM, SL_EIO (the store failed), SL_ECRYPTO (libsodium cannot be initialised).
 * On failure `out` is left empty and `report` holds no drops. Values that do not open are not
 * failures: see the top of this file.
 */
SL_MUST_CHECK int sl_control_snapshot_build(struct sl_store *st, const struct sl_secrets *sec,
                                            int64_t version, struct sl_buf *out,
                                            struct sl_snapshot_build_report *report);

/*
 * The same, with `n_extra` extra client entries (`extra`, borrowed; NULL when n_extra is 0)
 * appended after the static clients: the sandbox clients. Additional result: SL_EINVAL when an
 * entry lacks its id or environment id, or has a rule with half a credential (logged with the
 * client's id); an entry naming an environment that does not exist is compiled with
 * SL_SNAPSHOT_OFFLINE_ENV instead (logged); SL_EPOLICY when an entry breaks
 * another rule of the proxy (a duplicate id, a malformed address).
 */
SL_MUST_CHECK int
sl_control_snapshot_build_with_clients(struct sl_store *st, const struct sl_secrets *sec,
                                       int64_t version,
                                       const struct sl_snapshot_build_client *extra, size_t n_extra,
                                       struct sl_buf *out, struct sl_snapshot_build_report *report);

#endif
