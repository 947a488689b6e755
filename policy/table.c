/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/table.c - open-addressing hash tables of the compiled snapshot (see snapshot_int.h).
 *
 * Built once per snapshot, read by every worker: linear probing over a power-of-two array at
 * most half full, so a lookup touches one or two slots.
 */
#include <string.h>

#include "policy/snapshot_int.h"

uint64_t sl__hash(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = SL__HASH_INIT;

    while (n > 0) {
        h = sl__hash_step(h, b[--n]);
    }
    return h;
}

int sl__table_init(struct sl__table *t, struct sl_arena *arena, size_t n)
{
    size_t size = 4;

    t->slots = NULL;
    t->mask = 0;
    if (n == 0) {
        return 0;
    }
    while (size < 2 * n) {
        size *= 2;
    }
    if (size > UINT32_MAX / sizeof(struct sl__slot)) {
        return SL_ENOMEM;
    }
    t->slots = sl_arena_alloc(arena, size * sizeof(struct sl__slot));
    if (t->slots == NULL) {
        return SL_ENOMEM;
    }
    memset(t->slots, 0, size * sizeof(struct sl__slot));
    t->mask = (uint32_t)(size - 1);
    return 0;
}

const struct sl__slot *sl__table_find(const struct sl__table *t, uint64_t hash, const void *key,
                                      size_t n)
{
    if (t->slots == NULL) {
        return NULL;
    }
    for (uint32_t i = (uint32_t)hash & t->mask;; i = (i + 1) & t->mask) {
        const struct sl__slot *s = &t->slots[i];

        if (s->key == NULL) {
            return NULL;
        }
        if (s->hash == hash && s->key_len == n && memcmp(s->key, key, n) == 0) {
            return s;
        }
    }
}

bool sl__table_add(struct sl__table *t, const void *key, size_t n, uint32_t index, uint32_t *first)
{
    uint64_t hash = sl__hash(key, n);

    SL_BUG_ON(t->slots == NULL || n > UINT32_MAX);
    for (uint32_t i = (uint32_t)hash & t->mask;; i = (i + 1) & t->mask) {
        struct sl__slot *s = &t->slots[i];

        if (s->key == NULL) {
            *s = (struct sl__slot){ hash, key, (uint32_t)n, index };
            return true;
        }
        if (s->hash == hash && s->key_len == n && memcmp(s->key, key, n) == 0) {
            *first = s->first;
            return false;
        }
    }
}

void sl__addr_key_set(struct sl__addr_key *k, int family, const uint8_t *addr, unsigned prefix)
{
    size_t len = family == 4 ? 4 : 16;

    memset(k->b, 0, sizeof(k->b));
    k->b[0] = (uint8_t)family;
    k->b[1] = (uint8_t)prefix;
    for (size_t i = 0; i < len; i++) {
        unsigned bits = prefix > 8 * i ? prefix - 8 * (unsigned)i : 0;
        uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff00u >> bits);

        k->b[2 + i] = addr[i] & mask;
    }
}
