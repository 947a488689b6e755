/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/match.c - the compiled matcher of one rule list (an environment's or a client's).
 *
 * A request host is looked up in three steps, all bounded by the host's length except the last:
 *   1. the exact table, keyed by the whole pattern (exact hosts and IP literals);
 *   2. the suffix table, keyed by the pattern less its '*' (`*.github.com` -> `.github.com`):
 *      every suffix of the host that starts at a label boundary is looked up once. The hash is
 *      computed from the end of the name, so one backwards pass yields every suffix's hash and,
 *      at its end, the whole name's hash for step 1;
 *   3. the general globs, most specific first, stopping as soon as none left can win.
 * IP-literal hosts only take step 1: they match IP rules literally and never a pattern.
 */
#include <string.h>

#include "policy/snapshot_int.h"

#define NO_NEXT UINT32_MAX

/* Specificity of docs/reference/snapshot.md §3 as one number: class (exact above patterns), then
 * the length of the literal text after the last '*', then the pattern's length. Each length is <
 * 2^20. */
static uint64_t rank_of(enum sl__rule_class cls, size_t suffix_len, size_t pattern_len)
{
    uint64_t exact = cls == SL__RULE_EXACT ? 1 : 0;

    return exact << 40 | (uint64_t)suffix_len << 20 | (uint64_t)pattern_len;
}

static void classify(struct sl__rule *r)
{
    const char *star = memchr(r->pattern, '*', r->pattern_len);
    size_t last = r->pattern_len;

    if (star == NULL) {
        r->cls = SL__RULE_EXACT;
        r->rank = rank_of(r->cls, r->pattern_len, r->pattern_len);
        return;
    }
    while (r->pattern[--last] != '*') {
    }
    r->cls = (star == r->pattern && last == 0 && r->pattern_len > 2 && r->pattern[1] == '.')
                     ? SL__RULE_SUFFIX
                     : SL__RULE_GLOB;
    r->rank = rank_of(r->cls, r->pattern_len - last - 1, r->pattern_len);
}

/* Does `a` beat `b` (both globs of one list)? Higher rank, then earlier. */
static bool glob_before(const struct sl__rule *a, const struct sl__rule *b)
{
    return a->rank > b->rank || (a->rank == b->rank && a->order < b->order);
}

/* Links rule `i` into `t` under its key, at the end of the chain of that key. */
static void add_to_table(struct sl__ruleset *rs, struct sl__table *t, uint32_t i, const char *key,
                         size_t n)
{
    uint32_t first;

    if (sl__table_add(t, key, n, i, &first)) {
        return;
    }
    while (rs->rules[first].next_same != NO_NEXT) {
        first = rs->rules[first].next_same;
    }
    rs->rules[first].next_same = i;
}

int sl__ruleset_compile(struct sl__ruleset *rs, struct sl_arena *arena)
{
    size_t n_exact = 0;
    size_t n_suffix = 0;

    rs->n_globs = 0;
    for (uint32_t i = 0; i < rs->n; i++) {
        struct sl__rule *r = &rs->rules[i];

        r->order = i;
        r->next_same = NO_NEXT;
        classify(r);
        n_exact += r->cls == SL__RULE_EXACT;
        n_suffix += r->cls == SL__RULE_SUFFIX;
        rs->n_globs += r->cls == SL__RULE_GLOB;
    }
    SL_TRY(sl__table_init(&rs->exact, arena, n_exact));
    SL_TRY(sl__table_init(&rs->suffix, arena, n_suffix));
    rs->globs = sl_arena_alloc(arena, (rs->n_globs + 1) * sizeof(*rs->globs));
    if (rs->globs == NULL) {
        return SL_ENOMEM;
    }
    rs->n_globs = 0;
    for (uint32_t i = 0; i < rs->n; i++) {
        struct sl__rule *r = &rs->rules[i];
        uint32_t at;

        switch (r->cls) {
        case SL__RULE_EXACT:
            add_to_table(rs, &rs->exact, i, r->pattern, r->pattern_len);
            break;
        case SL__RULE_SUFFIX:
            add_to_table(rs, &rs->suffix, i, r->pattern + 1, r->pattern_len - 1);
            break;
        case SL__RULE_GLOB:
            /* Insertion sort: at most SL_POLICY_RULES_MAX entries. */
            at = rs->n_globs++;
            while (at > 0 && glob_before(r, &rs->rules[rs->globs[at - 1]])) {
                rs->globs[at] = rs->globs[at - 1];
                at--;
            }
            rs->globs[at] = i;
            break;
        }
    }
    return 0;
}

bool sl__glob_match(const char *pat, size_t pn, const char *s, size_t sn)
{
    size_t p = 0;
    size_t i = 0;
    size_t star = SIZE_MAX;
    size_t resume = 0;

    /* The classic single-backtrack matcher: on a mismatch, let the last '*' swallow one more
     * character. Iterative, O(pn * sn) at worst, both bounded by 253. */
    while (i < sn) {
        if (p < pn && pat[p] == '*') {
            star = p++;
            resume = i;
        } else if (p < pn && pat[p] == s[i]) {
            p++;
            i++;
        } else if (star != SIZE_MAX) {
            p = star + 1;
            i = ++resume;
        } else {
            return false;
        }
    }
    while (p < pn && pat[p] == '*') {
        p++;
    }
    return p == pn;
}

static bool port_covers(const struct sl__rule *r, uint16_t port)
{
    return r->port == 0 ? (port == 443 || port == 80) : r->port == port;
}

/* Does `r` (of the list `of_client` says) beat the best so far? */
static bool beats(const struct sl__match *m, const struct sl__rule *r, bool of_client)
{
    if (m->rule == NULL || r->rank != m->rule->rank) {
        return m->rule == NULL || r->rank > m->rule->rank;
    }
    if (of_client != m->of_client) {
        return of_client; /* a client's runtime rules come first */
    }
    return r->order < m->rule->order;
}

/* Walks the chain of one table hit: the first rule (in order) that covers the port. */
static void take_chain(const struct sl__ruleset *rs, const struct sl__slot *slot, uint16_t port,
                       bool of_client, struct sl__match *m)
{
    if (slot == NULL) {
        return;
    }
    m->host_seen = true;
    for (uint32_t i = slot->first; i != NO_NEXT; i = rs->rules[i].next_same) {
        const struct sl__rule *r = &rs->rules[i];

        m->passthrough_seen |= r->passthrough;
        if (port_covers(r, port)) {
            if (beats(m, r, of_client)) {
                m->rule = r;
                m->of_client = of_client;
            }
            return;
        }
    }
}

static void match_globs(const struct sl__ruleset *rs, const struct sl_host *host, uint16_t port,
                        bool of_client, struct sl__match *m)
{
    for (uint32_t k = 0; k < rs->n_globs; k++) {
        const struct sl__rule *r = &rs->rules[rs->globs[k]];

        if (m->rule != NULL && r->rank < m->rule->rank) {
            return; /* sorted: nothing further down can win */
        }
        if (!sl__glob_match(r->pattern, r->pattern_len, host->name, host->len)) {
            continue;
        }
        m->host_seen = true;
        m->passthrough_seen |= r->passthrough;
        if (port_covers(r, port) && beats(m, r, of_client)) {
            m->rule = r;
            m->of_client = of_client;
        }
    }
}

void sl__ruleset_match(const struct sl__ruleset *rs, const struct sl_host *host, uint16_t port,
                       bool of_client, struct sl__match *m)
{
    const char *name = host->name;
    size_t n = host->len;
    uint64_t h = SL__HASH_INIT;

    if (rs->n == 0) {
        return;
    }
    if (host->kind != SL_HOST_DNS) {
        take_chain(rs, sl__table_find(&rs->exact, sl__hash(name, n), name, n), port, of_client, m);
        return;
    }
    /* Shortest suffix first, so a longer suffix found later replaces a shorter one. A suffix at
     * position 0 would need '*' to match nothing before a leading dot, which no host has. */
    for (size_t i = n; i-- > 0;) {
        h = sl__hash_step(h, (uint8_t)name[i]);
        if (name[i] == '.' && i > 0 && rs->suffix.slots != NULL) {
            take_chain(rs, sl__table_find(&rs->suffix, h, name + i, n - i), port, of_client, m);
        }
    }
    take_chain(rs, sl__table_find(&rs->exact, h, name, n), port, of_client, m);
    match_globs(rs, host, port, of_client, m);
}
