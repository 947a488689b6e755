/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/clients.c - validation of the `clients` array (docs/reference/snapshot.md §3 clients).
 *
 * A token is a secret: messages say what is wrong with it, never what it is.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "base/hex.h"
#include "base/mem.h"
#include "base/time.h"
#include "policy/snapshot_int.h"

/* Room for a quoted value in a message (sl__quote cuts at 64 bytes, escapes take 4). */
#define QUOTED_MAX (64 * 4 + 8)

static const char *const client_keys[] = {
    "id", "environment", "token", "ip", "cidr", "expires_at", "rules", "git", "placeholders",
};

/* Whole seconds since the epoch (the fraction dropped: floor). */
int sl__parse_rfc3339(const char *s, size_t n, int64_t *out)
{
    struct sl_rfc3339 t;

    SL_TRY(sl_time_parse_rfc3339(s, n, &t));
    *out = t.ms >= 0 ? t.ms / 1000 : -((-t.ms + 999) / 1000);
    return 0;
}

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is kept as the IPv4 address: sources arrive
 * mapped on dual-stack sockets, and the identity must not depend on the socket. */
static void set_addr(struct sl__addr_key *k, int family, const uint8_t *a, unsigned prefix)
{
    static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

    if (family == 6 && prefix >= 96 && memcmp(a, mapped, sizeof(mapped)) == 0) {
        sl__addr_key_set(k, 4, a + 12, prefix - 96);
        return;
    }
    sl__addr_key_set(k, family, a, prefix);
}

/* inet_pton() of `s` as IPv4, else IPv6; the family (4 or 6) or 0. */
static int parse_ip(const char *s, uint8_t addr[16])
{
    if (inet_pton(AF_INET, s, addr) == 1) {
        return 4;
    }
    if (inet_pton(AF_INET6, s, addr) == 1) {
        return 6;
    }
    return 0;
}

static void parse_client_ip(struct sl__parse *p, const char *s, size_t n, struct sl_client *c)
{
    char quoted[QUOTED_MAX];
    uint8_t addr[16];
    int family = parse_ip(s, addr);

    if (family == 0) {
        sl__quote(quoted, sizeof(quoted), s, n);
        sl__error(p, "%s is not an IPv4 or IPv6 address%s", quoted,
                  (n > 0 && s[0] == '[') ? " (write IPv6 without brackets)" : "");
        return;
    }
    set_addr(&c->ip, family, addr, family == 4 ? 32 : 128);
    c->has_ip = true;
}

static void parse_client_cidr(struct sl__parse *p, const char *s, size_t n, struct sl_client *c)
{
    char quoted[QUOTED_MAX];
    char text[INET6_ADDRSTRLEN];
    char net[INET6_ADDRSTRLEN];
    const char *slash = memchr(s, '/', n);
    size_t an = slash != NULL ? (size_t)(slash - s) : 0;
    size_t pn = slash != NULL ? n - an - 1 : 0;
    uint8_t addr[16];
    int family = 0;
    int prefix = -1;
    struct sl__addr_key k;

    sl__quote(quoted, sizeof(quoted), s, n);
    if (an > 0 && an < sizeof(text) && pn >= 1 && pn <= 3 && (pn == 1 || slash[1] != '0')) {
        memcpy(text, s, an);
        text[an] = '\0';
        family = parse_ip(text, addr);
        prefix = sl_dec_digits(slash + 1, pn);
    }
    if (family == 0 || prefix < 0 || prefix > (family == 4 ? 32 : 128)) {
        sl__error(p, "%s is not a CIDR range (like 10.0.0.0/8 or fd00::/8)", quoted);
        return;
    }
    sl__addr_key_set(&k, family, addr, (unsigned)prefix);
    if (memcmp(k.b + 2, addr, family == 4 ? 4 : 16) != 0) {
        if (inet_ntop(family == 4 ? AF_INET : AF_INET6, k.b + 2, net, sizeof(net)) == NULL) {
            net[0] = '\0';
        }
        sl__error(p, "%s has host bits set; did you mean \"%s/%d\"?", quoted, net, prefix);
        return;
    }
    set_addr(&c->cidr, family, addr, (unsigned)prefix);
    c->has_cidr = true;
}

static void parse_client_token(struct sl__parse *p, const char *s, size_t n, struct sl_client *c)
{
    bool ok = n >= 1 && n <= 256;

    for (size_t i = 0; i < n && ok; i++) {
        ok = s[i] > 0x20 && s[i] < 0x7f;
    }
    if (!ok) {
        sl__error(p, "a token is 1-256 visible ASCII characters (no spaces)");
        return;
    }
    c->token = sl_arena_strndup(&p->s->arena, s, n);
    c->token_len = (uint32_t)n;
    if (c->token == NULL) {
        p->rc = SL_ENOMEM;
    }
}

static void parse_client_id(struct sl__parse *p, const char *s, size_t n, struct sl_client *c,
                            uint32_t index)
{
    char quoted[QUOTED_MAX];
    bool ok = n >= 1 && n <= SL_POLICY_NAME_MAX;
    uint32_t first;

    for (size_t i = 0; i < n && ok; i++) {
        ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')
             || (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '-';
    }
    sl__quote(quoted, sizeof(quoted), s, n);
    if (!ok) {
        sl__error(p, "%s: client ids are 1-128 characters of A-Z a-z 0-9 . _ -", quoted);
        return;
    }
    c->id = sl_arena_strndup(&p->s->arena, s, n);
    if (c->id == NULL) {
        p->rc = SL_ENOMEM;
        return;
    }
    if (!sl__table_add(&p->s->client_by_id, c->id, n, index, &first)) {
        sl__error(p, "duplicate id %s (first used at $.clients[%u])", quoted, first);
    }
}

static void parse_client_env(struct sl__parse *p, const char *s, size_t n, struct sl_client *c)
{
    char quoted[QUOTED_MAX];
    const struct sl__slot *slot;

    if (!p->envs_ok) {
        return; /* `environments` itself is broken; that error says enough */
    }
    slot = sl__table_find(&p->s->env_by_name, sl__hash(s, n), s, n);
    if (slot == NULL) {
        sl__quote(quoted, sizeof(quoted), s, n);
        sl__error(p, "unknown environment %s", quoted);
        return;
    }
    c->env = &p->s->envs[slot->first];
}

typedef void field_fn(struct sl__parse *p, const char *s, size_t n, struct sl_client *c);

/* Runs `fn` on the string member `key` of `json`, if present, with the path pointing at it.
 * Returns whether the member was present. */
static bool with_field(struct sl__parse *p, json_t *json, const char *key, bool required,
                       field_fn *fn, struct sl_client *c)
{
    size_t n = 0;
    const char *s = sl__get_string(p, json, key, required, &n);

    if (s != NULL) {
        size_t mark = sl__path_key(p, key);

        fn(p, s, n, c);
        sl__path_pop(p, mark);
    }
    return json_object_get(json, key) != NULL;
}

static void parse_client_expiry(struct sl__parse *p, const char *s, size_t n, struct sl_client *c)
{
    char quoted[QUOTED_MAX];

    if (sl__parse_rfc3339(s, n, &c->expires_at) != 0) {
        sl__quote(quoted, sizeof(quoted), s, n);
        sl__error(p, "%s is not an RFC 3339 date-time (like 2026-11-30T23:00:00Z)", quoted);
        return;
    }
    c->has_expiry = true;
}

/* The rule of `rs` whose credential names variable `env`, or NULL. */
static const struct sl__rule *rule_naming(const struct sl__ruleset *rs, const char *env)
{
    for (uint32_t i = 0; i < rs->n; i++) {
        const struct sl__credential *cr = rs->rules[i].credential;

        if (cr != NULL && cr->placeholder_env != NULL && strcmp(cr->placeholder_env, env) == 0) {
            return &rs->rules[i];
        }
    }
    return NULL;
}

/* One member of `placeholders` (the path points at it) into `out`. Returns false after the
 * error. */
static bool parse_placeholder(struct sl__parse *p, const char *env, json_t *v,
                              const struct sl_client *c, struct sl_placeholder *out)
{
    char quoted[QUOTED_MAX];
    const struct sl__rule *own = rule_naming(&c->rules, env);
    const struct sl__rule *inherited = c->env != NULL ? rule_naming(&c->env->rules, env) : NULL;
    const struct sl__rule *r = own != NULL ? own : inherited;
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);

    sl__quote(quoted, sizeof(quoted), env, strlen(env));
    if (!json_is_string(v) || !sl_placeholder_is_valid(s, n)) {
        sl__error(p, "a placeholder is \"" SL_PLACEHOLDER_PREFIX
                     "\" and 40 characters of a-z and 2-7");
        return false;
    }
    if (own != NULL && inherited != NULL) {
        sl__error(p,
                  "both a rule of this client and one of its environment name %s as their "
                  "placeholder_env",
                  quoted);
        return false;
    }
    if (r == NULL) {
        if (c->env != NULL) {
            sl__error(p,
                      "no credential of this client or of its environment has %s as its "
                      "placeholder_env",
                      quoted);
        }
        return false;
    }
    *out = (struct sl_placeholder){ .env = sl_arena_strndup(&p->s->arena, env, strlen(env)),
                                    .value = sl_arena_strndup(&p->s->arena, s, n),
                                    .rule = r->text,
                                    .header = r->credential->header,
                                    .secret = r->credential->value };
    if (out->env == NULL || out->value == NULL) {
        p->rc = SL_ENOMEM;
        return false;
    }
    return true;
}

void sl__parse_placeholders(struct sl__parse *p, json_t *json, struct sl_client *c)
{
    size_t n = json_object_size(json);
    size_t mark;
    const char *key;
    json_t *v;

    if (json == NULL) {
        return;
    }
    mark = sl__path_key(p, "placeholders");
    if (!json_is_object(json)) {
        sl__error(p, "must be an object of placeholders by variable name");
    } else if (n > 2 * SL_POLICY_CREDENTIALS_MAX) {
        sl__error(p, "too many placeholders (%zu; at most %d)", n, 2 * SL_POLICY_CREDENTIALS_MAX);
    } else if (n > 0
               && (c->placeholders = sl_arena_alloc(&p->s->arena, n * sizeof(*c->placeholders)))
                          == NULL) {
        p->rc = SL_ENOMEM;
    } else {
        json_object_foreach(json, key, v)
        {
            size_t m = sl__path_key(p, key);
            struct sl_placeholder *ph = &c->placeholders[c->n_placeholders];

            if (parse_placeholder(p, key, v, c, ph)) {
                bool dup = false;

                for (uint32_t i = 0; i < c->n_placeholders && !dup; i++) {
                    dup = strcmp(c->placeholders[i].value, ph->value) == 0;
                }
                if (dup) {
                    sl__error(p, "the same placeholder is given to two variables");
                } else {
                    c->n_placeholders++;
                }
            }
            sl__path_pop(p, m);
            if (p->rc != 0) {
                break;
            }
        }
    }
    if (c->n_placeholders == 0) {
        c->placeholders = NULL;
    }
    sl__path_pop(p, mark);
}

static void parse_client(struct sl__parse *p, json_t *json, struct sl_client *c, uint32_t index)
{
    size_t n = 0;
    const char *id;
    bool identified = false;

    if (!json_is_object(json)) {
        sl__error(p, "a client must be an object");
        return;
    }
    sl__check_keys(p, json, client_keys, SL_ARRAY_LEN(client_keys));
    id = sl__get_string(p, json, "id", true, &n);
    if (id != NULL) {
        size_t mark = sl__path_key(p, "id");

        parse_client_id(p, id, n, c, index);
        sl__path_pop(p, mark);
    }
    (void)with_field(p, json, "environment", true, parse_client_env, c);
    identified |= with_field(p, json, "token", false, parse_client_token, c);
    identified |= with_field(p, json, "ip", false, parse_client_ip, c);
    identified |= with_field(p, json, "cidr", false, parse_client_cidr, c);
    (void)with_field(p, json, "expires_at", false, parse_client_expiry, c);
    if (!identified) {
        sl__error(p, "a client needs at least one of \"token\", \"ip\" and \"cidr\"");
    }
    sl__parse_rules(p, json_object_get(json, "rules"), &c->rules);
    sl__parse_git(p, json_object_get(json, "git"), c);
    sl__parse_placeholders(p, json_object_get(json, "placeholders"), c);
}

void sl__parse_clients(struct sl__parse *p, json_t *json)
{
    struct sl_snapshot *s = p->s;
    size_t n = json_array_size(json);
    size_t mark;

    if (json == NULL) {
        return;
    }
    mark = sl__path_key(p, "clients");
    if (!json_is_array(json)) {
        sl__error(p, "must be an array of clients");
    } else if (n > SL_POLICY_CLIENTS_MAX) {
        sl__error(p, "too many clients (%zu; at most %d)", n, SL_POLICY_CLIENTS_MAX);
    } else if ((s->clients = sl_arena_alloc(&s->arena, (n + 1) * sizeof(*s->clients))) == NULL
               || sl__table_init(&s->client_by_id, &s->arena, n) != 0) {
        p->rc = SL_ENOMEM;
    } else {
        memset(s->clients, 0, (n + 1) * sizeof(*s->clients));
        for (size_t i = 0; i < n && p->rc == 0; i++) {
            size_t m = sl__path_index(p, i);

            parse_client(p, json_array_get(json, i), &s->clients[i], (uint32_t)i);
            sl__path_pop(p, m);
        }
        s->n_clients = (uint32_t)n;
    }
    sl__path_pop(p, mark);
}
