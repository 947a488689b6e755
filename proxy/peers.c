/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/peers.c - client connections open per source address (proxy/peers.h).
 */
#include "proxy/peers.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "base/hash.h"
#include "base/mem.h"

/* An address as 16 bytes: IPv6 as it is, IPv4 as its IPv4-mapped IPv6 form (::ffff:a.b.c.d), so
 * that both ways a dual-stack listener can see an IPv4 client are one key. */
struct key {
    uint8_t b[16];
};

struct entry {
    struct key key;
    /* 0: the entry is free. */
    uint32_t n;
};

struct sl_peers {
    pthread_mutex_t lock;
    uint8_t hash_key[SL_HASH_KEY_BYTES];
    unsigned cap;
    /* Entries in use, and the table's size (a power of two) minus one. */
    size_t used;
    size_t mask;
    struct entry *entries;
};

static bool to_key(const struct sockaddr *sa, struct key *k)
{
    memset(k, 0, sizeof(*k));
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;

        k->b[10] = 0xff;
        k->b[11] = 0xff;
        memcpy(&k->b[12], &in->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;

        memcpy(k->b, &in6->sin6_addr, sizeof(k->b));
        return true;
    }
    return false;
}

static size_t home(const struct sl_peers *t, const struct key *k)
{
    return (size_t)sl_siphash24(t->hash_key, k->b, sizeof(k->b)) & t->mask;
}

/* The entry of `k`, or the free one where it would go. Never loops: the table always has a free
 * entry (take() keeps one). */
static size_t find(const struct sl_peers *t, const struct key *k)
{
    size_t i = home(t, k);

    while (t->entries[i].n != 0 && memcmp(&t->entries[i].key, k, sizeof(*k)) != 0) {
        i = (i + 1) & t->mask;
    }
    return i;
}

/* Frees entry `i` and moves the entries after it in its run back so that every one stays
 * reachable from its home without tombstones (Knuth's algorithm R). */
static void remove_at(struct sl_peers *t, size_t i)
{
    size_t j = i;

    for (;;) {
        size_t h;

        j = (j + 1) & t->mask;
        if (t->entries[j].n == 0) {
            break;
        }
        h = home(t, &t->entries[j].key);
        /* Entry j may move to i when its home is not cyclically within (i, j]. */
        if ((i <= j) ? (i < h && h <= j) : (i < h || h <= j)) {
            continue;
        }
        t->entries[i] = t->entries[j];
        i = j;
    }
    t->entries[i].n = 0;
    t->used--;
}

int sl_peers_new(unsigned holders, unsigned cap, struct sl_peers **out)
{
    struct sl_peers *t;
    size_t size = 16;

    *out = NULL;
    if (holders == 0 || cap == 0) {
        return SL_EINVAL;
    }
    /* Twice the holders, plus one so that a free entry always ends a probe. */
    while (size < (size_t)holders * 2u + 1u) {
        size *= 2;
    }
    t = sl_calloc(1, sizeof(*t));
    if (t == NULL) {
        return SL_ENOMEM;
    }
    t->entries = sl_calloc(size, sizeof(*t->entries));
    if (t->entries == NULL || sl_hash_key_random(t->hash_key) < 0
        || pthread_mutex_init(&t->lock, NULL) != 0) {
        sl_free(t->entries);
        sl_free(t);
        return SL_ENOMEM;
    }
    t->cap = cap;
    t->mask = size - 1;
    *out = t;
    return 0;
}

void sl_peers_free(struct sl_peers *t)
{
    if (t == NULL) {
        return;
    }
    (void)pthread_mutex_destroy(&t->lock);
    sl_free(t->entries);
    sl_free(t);
}

bool sl_peers_take(struct sl_peers *t, const struct sockaddr *addr)
{
    struct key k;
    bool ok = false;
    size_t i;

    if (!to_key(addr, &k)) {
        return false;
    }
    (void)pthread_mutex_lock(&t->lock);
    i = find(t, &k);
    if (t->entries[i].n != 0) {
        if (t->entries[i].n < t->cap) {
            t->entries[i].n++;
            ok = true;
        }
    } else if (t->used < t->mask / 2u) {
        /* A new address, while the table is at most half full (--max-connections holders
         * fit; more would mean slots that were never given back). */
        t->entries[i].key = k;
        t->entries[i].n = 1;
        t->used++;
        ok = true;
    }
    (void)pthread_mutex_unlock(&t->lock);
    return ok;
}

void sl_peers_release(struct sl_peers *t, const struct sockaddr *addr)
{
    struct key k;
    size_t i;

    if (!to_key(addr, &k)) {
        return;
    }
    (void)pthread_mutex_lock(&t->lock);
    i = find(t, &k);
    if (t->entries[i].n > 1) {
        t->entries[i].n--;
    } else if (t->entries[i].n == 1) {
        remove_at(t, i);
    }
    (void)pthread_mutex_unlock(&t->lock);
}

unsigned sl_peers_count(struct sl_peers *t, const struct sockaddr *addr)
{
    struct key k;
    unsigned n;

    if (!to_key(addr, &k)) {
        return 0;
    }
    (void)pthread_mutex_lock(&t->lock);
    n = t->entries[find(t, &k)].n;
    (void)pthread_mutex_unlock(&t->lock);
    return n;
}

unsigned sl_peers_addresses(struct sl_peers *t)
{
    unsigned n;

    (void)pthread_mutex_lock(&t->lock);
    n = (unsigned)t->used;
    (void)pthread_mutex_unlock(&t->lock);
    return n;
}
