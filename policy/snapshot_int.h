/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/snapshot_int.h - the bodies of the snapshot's types, shared by the files of policy/
 * and by nothing else.
 *
 * Everything a snapshot points to lives in its arena and is written only while
 * sl_snapshot_parse() runs; afterwards it is read-only (see snapshot.h).
 *
 *   snapshot.c  entry point, errors, refcount, accessors, compile step
 *   rules.c     validation of environments and rules (JSON -> struct sl__rule)
 *   validate.c  method, header name and credential value checks (public: validate.h)
 *   clients.c   validation of clients (ids, tokens, addresses, RFC 3339)
 *   table.c     the hash tables (string and address keys)
 *   match.c     the compiled matcher of one rule list and its lookup
 *   git.c       a client's `git` object: validation, own-repository paths, protected branches
 *   placeholder.c  placeholders: their shape, the scan and the replacement (placeholder.h);
 *               a client's `placeholders` object is validated in clients.c
 *   identify.c  sl_policy_identify()
 *   decision.c  sl_policy_decide(), reasons, hints
 */
#ifndef SL_POLICY_SNAPSHOT_INT_H
#define SL_POLICY_SNAPSHOT_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/arena.h"
#include "base/err.h"
#include "base/jpath.h"
#include "policy/host.h"
#include "policy/placeholder.h"
#include "policy/snapshot.h"

/* ---- hash tables -------------------------------------------------------------------------- */

/* One slot of an open-addressing table. Several entries with the same key form a chain, in
 * document order, through a `next` index kept by the owner of the entries. */
struct sl__slot {
    /* sl__hash() of the key. */
    uint64_t hash;
    /* The key bytes, borrowed from the arena; NULL for an empty slot. */
    const uint8_t *key;
    uint32_t key_len;
    /* Index of the first entry with this key. */
    uint32_t first;
};

/* A table with a power-of-two number of slots, at most half of them used. slots == NULL for an
 * empty table (every lookup misses). */
struct sl__table {
    struct sl__slot *slots;
    uint32_t mask;
};

/* FNV-1a over the bytes from the last to the first. Going backwards lets the matcher hash
 * every suffix of a host name in one pass (see match.c). The keys come from the policy, not
 * from requests, so flooding is not a concern: lookups never insert. */
static inline uint64_t sl__hash_step(uint64_t h, uint8_t c)
{
    return (h ^ c) * 0x100000001b3ull;
}

#define SL__HASH_INIT 0xcbf29ce484222325ull

uint64_t sl__hash(const void *p, size_t n);

/* Sizes `t` for `n` keys, from `arena`. Returns 0 or SL_ENOMEM. n == 0 leaves it empty. */
SL_MUST_CHECK int sl__table_init(struct sl__table *t, struct sl_arena *arena, size_t n);

/* The slot holding `key`, or NULL. */
const struct sl__slot *sl__table_find(const struct sl__table *t, uint64_t hash, const void *key,
                                      size_t n);

/* Adds `key` -> `index` unless the key is present. Returns true when it was added, false when
 * it was present (then `*first` is the index already stored). The table must have been sized
 * for every key added. `key` must outlive the table. */
bool sl__table_add(struct sl__table *t, const void *key, size_t n, uint32_t index, uint32_t *first);

/* ---- rules and their matcher ------------------------------------------------------------- */

enum sl__rule_class {
    /* A host without '*', or an IP literal: found in the exact table. */
    SL__RULE_EXACT = 0,
    /* `*.suffix` with no other '*': found in the suffix table by the label walk. */
    SL__RULE_SUFFIX,
    /* Any other pattern with '*': tried one by one. */
    SL__RULE_GLOB,
};

struct sl__credential {
    /* Header name as written in the policy. Arena. */
    const char *header;
    /* The secret value. Arena. */
    const char *value;
    /* `placeholder_env`: the variable whose placeholder stands for `value` (then the header is
     * not injected: the placeholder is replaced in it, policy/placeholder.h); NULL for a
     * credential that is injected. Arena. */
    const char *placeholder_env;
};

struct sl__rule {
    /* Normalised pattern plus `:port` when there is one; what decisions report. Arena. */
    const char *text;
    /* Normalised pattern without the port. Arena. */
    const char *pattern;
    uint32_t pattern_len;
    /* Specificity (higher wins): class bit, literal suffix length, pattern length. */
    uint64_t rank;
    /* 0 = 80 and 443. */
    uint16_t port;
    enum sl__rule_class cls;
    enum sl_host_kind host_kind;
    /* Position in its rule list, from 0. */
    uint32_t order;
    /* The next rule of the same list with the same table key, UINT32_MAX at the end. */
    uint32_t next_same;
    /* Allowed methods; n_methods == 0 means all. Arena. */
    const char *const *methods;
    uint32_t n_methods;
    /* NULL when the rule injects nothing. Arena. */
    const struct sl__credential *credential;
    /* `"tls": "passthrough"`: its tunnels are relayed uninspected. Then `methods` is empty and
     * `credential` NULL (the parser refuses the combination). */
    bool passthrough;
};

/* The rules of one environment or one client, compiled. */
struct sl__ruleset {
    /* In document order. Arena. */
    struct sl__rule *rules;
    uint32_t n;
    /* Key: the pattern (exact rules) / the pattern without its '*' (suffix rules, ".x.com"). */
    struct sl__table exact;
    struct sl__table suffix;
    /* Indices of the glob rules, most specific first (rank down, order up). Arena. */
    uint32_t *globs;
    uint32_t n_globs;
    uint32_t n_credentials;
};

/* The best rule found so far by sl__ruleset_match(). Zero it before the first call. */
struct sl__match {
    const struct sl__rule *rule;
    /* The rule comes from the client's runtime rules. */
    bool of_client;
    /* Some rule's host pattern matched, whatever its port. */
    bool host_seen;
    /* ... and one of those is a passthrough rule. */
    bool passthrough_seen;
};

/* Compiles `rs->rules[0 .. rs->n)` (already validated): classes, ranks, tables, glob order.
 * Returns 0 or SL_ENOMEM. */
SL_MUST_CHECK int sl__ruleset_compile(struct sl__ruleset *rs, struct sl_arena *arena);

/* Looks `host`:`port` up in `rs` and improves `*m` when a better rule is found. */
void sl__ruleset_match(const struct sl__ruleset *rs, const struct sl_host *host, uint16_t port,
                       bool of_client, struct sl__match *m);

/* Does glob `pat` (where '*' matches any run, the empty run too) match all of `s`? */
bool sl__glob_match(const char *pat, size_t pn, const char *s, size_t sn);

/* ---- environments, clients, snapshot ----------------------------------------------------- */

struct sl_env {
    /* Arena. */
    const char *name;
    /* What refusals call it: the snapshot's "label", else the name (arena or `name`). */
    const char *label;
    bool default_allow;
    /* `observe_until` in seconds since the epoch (has_observe): until then a request the policy
     * refuses for its host, port or method is let out and marked (decision.h). */
    bool has_observe;
    int64_t observe_until;
    struct sl__ruleset rules;
};

/* An address as a table key: family byte (4 or 6), prefix length byte, 16 address bytes (an
 * IPv4 address in the first 4, the rest zero), host bits zeroed to the prefix. */
struct sl__addr_key {
    uint8_t b[18];
};

/* A client's `git` object (policy/git.h), validated. Everything in the arena. */
struct sl_git {
    /* The git host in normal form, and its port (443 when the snapshot gives none). */
    struct sl_host host;
    uint16_t port;
    /* "" or "/seg..." without a trailing '/'; `base_len` bytes. */
    const char *base_path;
    uint32_t base_len;
    /* "owner/name"; `repo_len` bytes. */
    const char *repo;
    uint32_t repo_len;
    /* access "write" (else "read"). */
    bool write;
    /* The credential injected on the repository's own paths. Never NULL once parsed. */
    const struct sl__credential *credential;
    const char *default_branch;
    uint32_t default_branch_len;
    /* The protected globs, NUL-terminated strings as slices; NULL when there are none. */
    struct sl_slice *protected;
    uint32_t n_protected;
};

struct sl_client {
    /* Arena. */
    const char *id;
    /* NULL when the client has no token. Arena. */
    const char *token;
    uint32_t token_len;
    bool has_ip;
    bool has_cidr;
    bool has_expiry;
    /* Prefix length 32 or 128. */
    struct sl__addr_key ip;
    struct sl__addr_key cidr;
    int64_t expires_at;
    const struct sl_env *env;
    struct sl__ruleset rules;
    /* The client's git access, NULL when it has none. */
    const struct sl_git *git;
    /* Its placeholders (`placeholders`), each tied to the credential rule that names its
     * variable. Arena; NULL when it has none. */
    struct sl_placeholder *placeholders;
    uint32_t n_placeholders;
    /* Chains of the address tables, UINT32_MAX at the end. */
    uint32_t next_same_ip;
    uint32_t next_same_cidr;
};

struct sl_snapshot {
    atomic_long refs;
    /* Owns everything below but `raw`. */
    struct sl_arena arena;
    int64_t version;
    /* The document as parsed; owned (sl_malloc). */
    uint8_t *raw;
    size_t raw_len;
    struct sl_env *envs;
    uint32_t n_envs;
    struct sl_client *clients;
    uint32_t n_clients;
    struct sl__table env_by_name;
    struct sl__table client_by_id;
    /* Every client with an `ip`, by it (key prefix 32/128; token clients too, which only
     * sl_policy_identify_address() takes), and the clients without a token that have a `cidr`
     * but no `ip`, by their network. */
    struct sl__table client_by_ip;
    struct sl__table client_by_cidr;
    /* Prefix lengths present in client_by_cidr, longest first. */
    uint8_t v4_prefixes[33];
    uint8_t n_v4_prefixes;
    uint8_t v6_prefixes[129];
    uint8_t n_v6_prefixes;
    size_t n_rules;
    size_t n_credentials;
};

/* Fills `k` from `family` (4 or 6), `addr` (4 or 16 bytes) and `prefix`, zeroing host bits. */
void sl__addr_key_set(struct sl__addr_key *k, int family, const uint8_t *addr, unsigned prefix);

/* ---- validation -------------------------------------------------------------------------- */

/* The state of one sl_snapshot_parse(). */
struct sl__parse {
    struct sl_snapshot *s;
    /* Where errors go; NULL when the caller wants none (they are still counted). */
    struct sl_policy_errors *errs;
    size_t n_errors;
    /* Where warnings go; NULL when the caller wants none. */
    struct sl_policy_errors *warns;
    /* The JSON path of the value being looked at, NUL-terminated. */
    char path[SL_POLICY_PATH_MAX];
    size_t path_len;
    /* SL_ENOMEM once an allocation failed; the parse then stops. */
    int rc;
    /* The environments member was usable, so client environments can be looked up. */
    bool envs_ok;
};

/* Records an error at the current path (unless the cap is reached). */
void sl__error(struct sl__parse *p, const char *fmt, ...) SL_PRINTF(2, 3);

/* Records a warning at the current path (unless the cap is reached, or none are wanted). */
void sl__warn(struct sl__parse *p, const char *fmt, ...) SL_PRINTF(2, 3);

/* Appends `.key` (or `["key"]` when it has other characters) / `[i]` to the path and returns
 * the old length, to be passed to sl__path_pop(). See base/jpath.h. */
static inline size_t sl__path_key(struct sl__parse *p, const char *key)
{
    return sl_jpath_key(p->path, sizeof(p->path), &p->path_len, key);
}

static inline size_t sl__path_index(struct sl__parse *p, size_t i)
{
    return sl_jpath_index(p->path, sizeof(p->path), &p->path_len, i);
}

static inline void sl__path_pop(struct sl__parse *p, size_t mark)
{
    sl_jpath_pop(p->path, &p->path_len, mark);
}

/* Writes `"s"` into `dst`, escaping what is not printable ASCII and cutting after 64 bytes.
 * For messages only; never for secrets. */
static inline void sl__quote(char *dst, size_t cap, const char *s, size_t n)
{
    sl_jpath_quote(dst, cap, s, n);
}

/* Checks that every key of `obj` is one of `allowed` (`n` names); errors name the strays. */
void sl__check_keys(struct sl__parse *p, json_t *obj, const char *const *allowed, size_t n);

/* The string member `key` of `obj`: NULL when absent (an error when `required`) or not a
 * string (always an error). */
const char *sl__get_string(struct sl__parse *p, json_t *obj, const char *key, bool required,
                           size_t *len);

/* Validates the credential object `json` (the path points at its parent); returns it, or NULL
 * after recording the error. */
const struct sl__credential *sl__parse_credential(struct sl__parse *p, json_t *json);

/* Validates a client's `placeholders` object (`json`, NULL when absent) into c->placeholders,
 * once its rules and environment are known. */
void sl__parse_placeholders(struct sl__parse *p, json_t *json, struct sl_client *c);

/* Validates a client's `git` object (`json`, NULL when absent) into c->git. */
void sl__parse_git(struct sl__parse *p, json_t *json, struct sl_client *c);

/* Validates `json` (a rule array, NULL when absent) into `rs`. */
void sl__parse_rules(struct sl__parse *p, json_t *json, struct sl__ruleset *rs);

/* Validates the `environments` object into p->s->envs and builds env_by_name. */
void sl__parse_envs(struct sl__parse *p, json_t *json);

/* Validates the `clients` array into p->s->clients and builds client_by_id. */
void sl__parse_clients(struct sl__parse *p, json_t *json);

/* Parses an RFC 3339 date-time into seconds since the epoch. Returns 0 or SL_EINVAL. */
SL_MUST_CHECK int sl__parse_rfc3339(const char *s, size_t n, int64_t *out);

#endif
