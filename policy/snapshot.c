/* SPDX-License-Identifier: Apache-2.0 */
#include "policy/snapshot.h"

#include <pthread.h>
#include <string.h>

#include <jansson.h>

#include "base/jdepth.h"
#include "base/mem.h"
#include "policy/snapshot_int.h"

/* Arena chunks: big enough that a typical snapshot takes a handful of them. The cap bounds
 * what a 64 MiB document can compile into. */
#define ARENA_CHUNK_BYTES ((size_t)64 << 10)
#define ARENA_MAX_BYTES   ((size_t)1 << 30)

#define NO_NEXT UINT32_MAX

static const char *const root_keys[] = { "version", "environments", "clients" };

static pthread_once_t jansson_once = PTHREAD_ONCE_INIT;

/* jansson keeps its allocator in a global; every value it ever allocates comes from malloc
 * (through sl_malloc or not), so switching once, before the first parse, is safe. */
static void use_our_allocator(void)
{
    json_set_alloc_funcs(sl_malloc, sl_free);
}

static void parse_version(struct sl__parse *p, json_t *json)
{
    size_t mark = sl__path_key(p, "version");

    if (json == NULL) {
        sl__error(p, "required field missing");
    } else if (!json_is_integer(json) || json_integer_value(json) < 1) {
        sl__error(p, "must be an integer >= 1");
    } else {
        p->s->version = json_integer_value(json);
    }
    sl__path_pop(p, mark);
}

static void validate(struct sl__parse *p, json_t *root)
{
    if (!json_is_object(root)) {
        sl__error(p, "the snapshot must be a JSON object");
        return;
    }
    sl__check_keys(p, root, root_keys, SL_ARRAY_LEN(root_keys));
    parse_version(p, json_object_get(root, "version"));
    sl__parse_envs(p, json_object_get(root, "environments"));
    if (p->rc == 0) {
        sl__parse_clients(p, json_object_get(root, "clients"));
    }
}

/* Links client `i` into an address table, at the end of the chain of its key. */
static void add_client(struct sl_snapshot *s, struct sl__table *t, uint32_t i, bool by_ip)
{
    struct sl_client *c = &s->clients[i];
    const struct sl__addr_key *k = by_ip ? &c->ip : &c->cidr;
    uint32_t at;

    if (sl__table_add(t, k->b, sizeof(k->b), i, &at)) {
        return;
    }
    for (;;) {
        uint32_t *next = by_ip ? &s->clients[at].next_same_ip : &s->clients[at].next_same_cidr;

        if (*next == NO_NEXT) {
            *next = i;
            return;
        }
        at = *next;
    }
}

static void note_prefix(struct sl_snapshot *s, const struct sl__addr_key *k)
{
    uint8_t *list = k->b[0] == 4 ? s->v4_prefixes : s->v6_prefixes;
    uint8_t *n = k->b[0] == 4 ? &s->n_v4_prefixes : &s->n_v6_prefixes;
    uint8_t at = *n;

    for (uint8_t i = 0; i < *n; i++) {
        if (list[i] == k->b[1]) {
            return;
        }
    }
    /* Longest first, so identification can stop at the first hit. */
    while (at > 0 && list[at - 1] < k->b[1]) {
        list[at] = list[at - 1];
        at--;
    }
    list[at] = k->b[1];
    (*n)++;
}

/* Builds the address tables (docs/reference/snapshot.md §3): every client with an `ip` by that
 * address, token clients included (a request with Proxy-Authorization never looks there, one
 * without it skips them; transparent connections and DNS queries, which carry no token, find
 * them: sl_policy_identify_address()), and the clients without a token or an `ip` that have a
 * `cidr` by their network. */
static int compile_clients(struct sl_snapshot *s)
{
    size_t n_ip = 0;
    size_t n_cidr = 0;

    for (uint32_t i = 0; i < s->n_clients; i++) {
        struct sl_client *c = &s->clients[i];

        c->next_same_ip = NO_NEXT;
        c->next_same_cidr = NO_NEXT;
        SL_TRY(sl__ruleset_compile(&c->rules, &s->arena));
        n_ip += c->has_ip;
        n_cidr += c->token == NULL && !c->has_ip && c->has_cidr;
    }
    SL_TRY(sl__table_init(&s->client_by_ip, &s->arena, n_ip));
    SL_TRY(sl__table_init(&s->client_by_cidr, &s->arena, n_cidr));
    for (uint32_t i = 0; i < s->n_clients; i++) {
        struct sl_client *c = &s->clients[i];

        if (c->has_ip) {
            add_client(s, &s->client_by_ip, i, true);
        } else if (c->token == NULL && c->has_cidr) {
            add_client(s, &s->client_by_cidr, i, false);
            note_prefix(s, &c->cidr);
        }
    }
    return 0;
}

static int compile(struct sl_snapshot *s)
{
    for (uint32_t i = 0; i < s->n_envs; i++) {
        SL_TRY(sl__ruleset_compile(&s->envs[i].rules, &s->arena));
    }
    return compile_clients(s);
}

static void snapshot_free(struct sl_snapshot *s)
{
    sl_arena_finish(&s->arena);
    sl_free(s->raw);
    sl_free(s);
}

/* Reads the document into `p->s`. Returns 0, SL_EPOLICY or SL_ENOMEM. */
static int load(struct sl__parse *p, const void *json, size_t n)
{
    json_error_t jerr;
    json_t *root;
    char *near;

    if (n > SL_SNAPSHOT_MAX_BYTES) {
        sl__error(p, "the snapshot is larger than 64 MiB");
        return SL_EPOLICY;
    }
    /* jansson recurses once per nesting level (up to 2048 levels). The schema needs 6; refusing
     * deeper documents before jansson sees them bounds its stack use. */
    if (sl_jdepth_is_over(json, n, SL_SNAPSHOT_MAX_DEPTH)) {
        sl__error(p, "nested deeper than %d levels", SL_SNAPSHOT_MAX_DEPTH);
        return SL_EPOLICY;
    }
    root = json_loadb(json, n, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        /* jansson leaves the text empty when an allocation failed deep inside. */
        if (json_error_code(&jerr) == json_error_out_of_memory || jerr.text[0] == '\0') {
            return SL_ENOMEM;
        }
        /* jansson quotes the text near the error, which may be part of a secret. */
        near = strstr(jerr.text, " near '");
        if (near != NULL) {
            *near = '\0';
        }
        sl__error(p, "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column,
                  json_error_code(&jerr) == json_error_null_character
                          ? "strings must not contain NUL characters (\\u0000)"
                          : jerr.text);
        return p->rc != 0 ? p->rc : SL_EPOLICY;
    }
    validate(p, root);
    json_decref(root);
    if (p->rc != 0) {
        return p->rc;
    }
    return p->n_errors > 0 ? SL_EPOLICY : 0;
}

int sl_snapshot_parse(const void *json, size_t n, struct sl_snapshot **out,
                      struct sl_policy_errors *errs)
{
    return sl_snapshot_parse_warn(json, n, out, errs, NULL);
}

int sl_snapshot_parse_warn(const void *json, size_t n, struct sl_snapshot **out,
                           struct sl_policy_errors *errs, struct sl_policy_errors *warns)
{
    struct sl__parse p = { .errs = errs, .warns = warns, .path = "$", .path_len = 1 };
    struct sl_snapshot *s;
    int rc;

    *out = NULL;
    if (errs != NULL) {
        sl_policy_errors_finish(errs);
    }
    if (warns != NULL) {
        sl_policy_errors_finish(warns);
    }
    (void)pthread_once(&jansson_once, use_our_allocator);
    s = sl_calloc(1, sizeof(*s));
    if (s == NULL) {
        return SL_ENOMEM;
    }
    sl_arena_init(&s->arena, ARENA_CHUNK_BYTES, ARENA_MAX_BYTES);
    p.s = s;
    rc = load(&p, json, n);
    if (rc == 0) {
        rc = compile(s);
    }
    if (rc == 0) {
        s->raw = sl_malloc(n);
        rc = s->raw == NULL ? SL_ENOMEM : 0;
    }
    if (rc != 0) {
        snapshot_free(s);
        return rc;
    }
    memcpy(s->raw, json, n);
    s->raw_len = n;
    atomic_init(&s->refs, 1);
    *out = s;
    return 0;
}

struct sl_snapshot *sl_snapshot_ref(struct sl_snapshot *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    return s;
}

void sl_snapshot_unref(struct sl_snapshot *s)
{
    if (s == NULL) {
        return;
    }
    /* acq_rel: every holder's reads happen before the free by the last one. */
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
        snapshot_free(s);
    }
}

int64_t sl_snapshot_version(const struct sl_snapshot *s)
{
    return s->version;
}

bool sl_snapshot_is_identical(const struct sl_snapshot *s, const void *json, size_t n)
{
    return n == s->raw_len && (n == 0 || memcmp(s->raw, json, n) == 0);
}

size_t sl_snapshot_env_count(const struct sl_snapshot *s)
{
    return s->n_envs;
}

size_t sl_snapshot_client_count(const struct sl_snapshot *s)
{
    return s->n_clients;
}

size_t sl_snapshot_rule_count(const struct sl_snapshot *s)
{
    return s->n_rules;
}

size_t sl_snapshot_credential_count(const struct sl_snapshot *s)
{
    return s->n_credentials;
}

const struct sl_env *sl_snapshot_find_env(const struct sl_snapshot *s, const char *name)
{
    size_t n = strlen(name);
    const struct sl__slot *slot = sl__table_find(&s->env_by_name, sl__hash(name, n), name, n);

    return slot != NULL ? &s->envs[slot->first] : NULL;
}

const struct sl_client *sl_snapshot_find_client(const struct sl_snapshot *s, const char *id)
{
    size_t n = strlen(id);
    const struct sl__slot *slot = sl__table_find(&s->client_by_id, sl__hash(id, n), id, n);

    return slot != NULL ? &s->clients[slot->first] : NULL;
}

const char *sl_env_name(const struct sl_env *e)
{
    return e->name;
}

bool sl_policy_label_ok(const char *s, size_t n)
{
    if (n < 1 || n > SL_POLICY_LABEL_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c < 0x20 || c == 0x7f) {
            return false;
        }
    }
    return true;
}

const char *sl_env_label(const struct sl_env *e)
{
    return e->label;
}

bool sl_env_default_allows(const struct sl_env *e)
{
    return e->default_allow;
}

const char *sl_client_id(const struct sl_client *c)
{
    return c->id;
}

const struct sl_env *sl_client_env(const struct sl_client *c)
{
    return c->env;
}

bool sl_client_expiry(const struct sl_client *c, int64_t *at_s)
{
    if (c->has_expiry) {
        *at_s = c->expires_at;
    }
    return c->has_expiry;
}

bool sl_client_has_token(const struct sl_client *c)
{
    return c->token != NULL;
}

const struct sl_git *sl_client_git(const struct sl_client *c)
{
    return c->git;
}
