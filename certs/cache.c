/* SPDX-License-Identifier: Apache-2.0 */
#include "certs/cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <openssl/rand.h>

#include "base/hash.h"
#include "base/list.h"
#include "base/mem.h"
#include "certs/certs_int.h"

/* Room for one error line handed from the minting thread to the threads that waited for it. */
#define ERR_BYTES 256

enum leaf_state {
    LEAF_MINTING = 0,
    LEAF_READY,
    LEAF_FAILED,
};

struct sl_leaf {
    /* References: the table holds one while the entry is in it, every caller holds its own. */
    atomic_size_t refs;
    /* Written once by the minting thread before the entry turns LEAF_READY under the cache lock,
     * read-only afterwards: the certificate (owned), a reference to the shared leaf key, and the
     * attachment (owned, freed through ctx_free_fn). */
    X509 *cert;
    EVP_PKEY *key;
    void *ctx;
    /* Copied from the cache's config: a leaf may outlive its cache. */
    sl_leaf_ctx_free_fn *ctx_free_fn;
    void *ctx_arg;
    /* Everything below is guarded by the cache lock. */
    enum leaf_state state;
    /* LEAF_FAILED only: the error code and message (owned; NULL when out of memory) that the
     * threads which waited for the mint return. */
    int rc;
    char *err;
    /* Keyed hash of the host: picks the bucket, and saves most string comparisons. */
    uint64_t hash;
    /* Next entry of the same bucket. */
    struct sl_leaf *chain;
    /* Link in the recency list, which holds the LEAF_READY entries of the table (its own
     * neighbour while in none). */
    struct sl_list recency;
    /* Links the entries one call evicted, released once the lock is dropped. */
    struct sl_leaf *next_dead;
    /* Length of `host` in bytes, at most SL_MINT_HOST_MAX. */
    size_t host_len;
    /* The host, NUL-terminated; immutable. */
    char host[];
};

struct sl_leaf_cache {
    /* Mints on misses; borrowed. */
    const struct sl_minter *minter;
    /* Attachment hooks and their argument (config); borrowed. */
    sl_leaf_ctx_fn *ctx_fn;
    sl_leaf_ctx_free_fn *ctx_free_fn;
    void *ctx_arg;
    /* Most LEAF_READY entries in the table. */
    size_t capacity;
    /* Key of the table's hash, random per cache. */
    uint8_t hash_key[16];
    /* Guards the fields below and the guarded fields of every entry in the table. */
    pthread_mutex_t lock;
    /* Broadcast whenever an entry leaves LEAF_MINTING. */
    pthread_cond_t minted;
    /* Bucket heads (owned array, `nbuckets` of them, a power of two). Each entry in a chain holds
     * the table's reference. In-flight (LEAF_MINTING) entries are in the table too. */
    struct sl_leaf **buckets;
    size_t nbuckets;
    /* Head of the recency list: first the most, last the least recently used LEAF_READY entry. */
    struct sl_list recent;
    /* Counters (see struct sl_leaf_cache_stats), atomic so that stats take no lock. */
    atomic_uint_fast64_t hits;
    atomic_uint_fast64_t misses;
    atomic_uint_fast64_t mints;
    atomic_uint_fast64_t mint_errors;
    atomic_uint_fast64_t evictions;
    /* LEAF_READY entries in the table; changed under the lock only. */
    atomic_size_t entries;
};

static void copy_err(char *err, size_t errlen, const char *msg)
{
    if (errlen > 0) {
        (void)snprintf(err, errlen, "%s", msg);
    }
}

static struct sl_leaf *leaf_new(const struct sl_leaf_cache *c, const char *host, size_t n,
                                uint64_t hash)
{
    struct sl_leaf *e;

    e = sl_calloc(1, sizeof(*e) + n + 1);
    if (e == NULL) {
        return NULL;
    }
    atomic_init(&e->refs, 1);
    e->ctx_free_fn = c->ctx_free_fn;
    e->ctx_arg = c->ctx_arg;
    e->state = LEAF_MINTING;
    sl_list_init(&e->recency);
    e->hash = hash;
    e->host_len = n;
    memcpy(e->host, host, n);
    e->host[n] = '\0';
    return e;
}

static void leaf_free(struct sl_leaf *e)
{
    if (e->ctx != NULL && e->ctx_free_fn != NULL) {
        e->ctx_free_fn(e->ctx, e->ctx_arg);
    }
    X509_free(e->cert);
    EVP_PKEY_free(e->key);
    sl_free(e->err);
    sl_free(e);
}

struct sl_leaf *sl_leaf_ref(struct sl_leaf *l)
{
    atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
    return l;
}

void sl_leaf_unref(struct sl_leaf *l)
{
    if (l == NULL) {
        return;
    }
    /* Release so that this thread's use happens before the free; acquire so that the free sees
     * every other thread's use. */
    if (atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) == 1) {
        leaf_free(l);
    }
}

X509 *sl_leaf_cert(const struct sl_leaf *l)
{
    return l->cert;
}

EVP_PKEY *sl_leaf_key(const struct sl_leaf *l)
{
    return l->key;
}

void *sl_leaf_ctx(const struct sl_leaf *l)
{
    return l->ctx;
}

const char *sl_leaf_host(const struct sl_leaf *l)
{
    return l->host;
}

int sl_leaf_cache_create(const struct sl_minter *m, const struct sl_leaf_cache_config *cfg,
                         struct sl_leaf_cache **out)
{
    size_t cap = SL_LEAF_CACHE_DEFAULT_CAPACITY;
    size_t nbuckets = 16;
    struct sl_leaf_cache *c;
    int rc;

    if (cfg != NULL && cfg->capacity != 0) {
        cap = cfg->capacity;
    }
    SL_ENSURE(cap <= SL_LEAF_CACHE_MAX_CAPACITY, SL_EINVAL);
    /* One bucket per entry at full capacity keeps the chains short. */
    while (nbuckets < cap) {
        nbuckets *= 2;
    }
    c = sl_calloc(1, sizeof(*c));
    if (c == NULL) {
        return SL_ENOMEM;
    }
    c->buckets = sl_calloc(nbuckets, sizeof(struct sl_leaf *));
    if (c->buckets == NULL) {
        rc = SL_ENOMEM;
        goto fail_free;
    }
    if (RAND_bytes(c->hash_key, (int)sizeof(c->hash_key)) != 1) {
        rc = SL_ECRYPTO;
        goto fail_free_buckets;
    }
    rc = pthread_mutex_init(&c->lock, NULL);
    if (rc != 0) {
        rc = -rc;
        goto fail_free_buckets;
    }
    rc = pthread_cond_init(&c->minted, NULL);
    if (rc != 0) {
        rc = -rc;
        goto fail_destroy_lock;
    }
    c->minter = m;
    if (cfg != NULL) {
        c->ctx_fn = cfg->ctx_fn;
        c->ctx_free_fn = cfg->ctx_free_fn;
        c->ctx_arg = cfg->ctx_arg;
    }
    c->capacity = cap;
    c->nbuckets = nbuckets;
    sl_list_init(&c->recent);
    atomic_init(&c->hits, 0);
    atomic_init(&c->misses, 0);
    atomic_init(&c->mints, 0);
    atomic_init(&c->mint_errors, 0);
    atomic_init(&c->evictions, 0);
    atomic_init(&c->entries, 0);
    *out = c;
    return 0;
fail_destroy_lock:
    pthread_mutex_destroy(&c->lock);
fail_free_buckets:
    sl_free(c->buckets);
fail_free:
    sl_free(c);
    return rc;
}

void sl_leaf_cache_destroy(struct sl_leaf_cache *c)
{
    if (c == NULL) {
        return;
    }
    for (size_t i = 0; i < c->nbuckets; i++) {
        struct sl_leaf *e = c->buckets[i];

        while (e != NULL) {
            struct sl_leaf *next = e->chain;

            /* An entry in flight means a thread is still inside the cache. */
            SL_BUG_ON(e->state != LEAF_READY);
            sl_leaf_unref(e);
            e = next;
        }
    }
    sl_free(c->buckets);
    pthread_cond_destroy(&c->minted);
    pthread_mutex_destroy(&c->lock);
    sl_free(c);
}

void sl_leaf_cache_stats(struct sl_leaf_cache *c, struct sl_leaf_cache_stats *out)
{
    out->hits = atomic_load_explicit(&c->hits, memory_order_relaxed);
    out->misses = atomic_load_explicit(&c->misses, memory_order_relaxed);
    out->mints = atomic_load_explicit(&c->mints, memory_order_relaxed);
    out->mint_errors = atomic_load_explicit(&c->mint_errors, memory_order_relaxed);
    out->evictions = atomic_load_explicit(&c->evictions, memory_order_relaxed);
    out->entries = atomic_load_explicit(&c->entries, memory_order_relaxed);
    out->capacity = c->capacity;
}

static void count(atomic_uint_fast64_t *counter)
{
    atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

/* The functions below run with the cache lock held. */

static struct sl_leaf **bucket_of(const struct sl_leaf_cache *c, uint64_t hash)
{
    return &c->buckets[hash & (c->nbuckets - 1)];
}

static struct sl_leaf *table_find(const struct sl_leaf_cache *c, const char *host, size_t n,
                                  uint64_t hash)
{
    for (struct sl_leaf *e = *bucket_of(c, hash); e != NULL; e = e->chain) {
        if (e->hash == hash && e->host_len == n && memcmp(e->host, host, n) == 0) {
            return e;
        }
    }
    return NULL;
}

/* Links `e` into the table, which takes a reference. */
static void table_insert(struct sl_leaf_cache *c, struct sl_leaf *e)
{
    struct sl_leaf **head = bucket_of(c, e->hash);

    e->chain = *head;
    *head = sl_leaf_ref(e);
}

/* Unlinks `e` from the table; the caller then owns the table's reference. */
static void table_remove(struct sl_leaf_cache *c, struct sl_leaf *e)
{
    struct sl_leaf **p = bucket_of(c, e->hash);

    while (*p != e) {
        SL_BUG_ON(*p == NULL);
        p = &(*p)->chain;
    }
    *p = e->chain;
    e->chain = NULL;
}

static void recency_touch(struct sl_leaf_cache *c, struct sl_leaf *e)
{
    if (c->recent.next != &e->recency) {
        sl_list_remove(&e->recency);
        sl_list_push_front(&c->recent, &e->recency);
    }
}

/* Takes the least recently used entries out until the table is within capacity. Returns them
 * linked by next_dead, each with the table's reference for the caller to drop after unlocking
 * (the last reference runs the attachment's free hook, which must not run under the lock). */
static struct sl_leaf *evict(struct sl_leaf_cache *c)
{
    struct sl_leaf *dead = NULL;

    while (atomic_load_explicit(&c->entries, memory_order_relaxed) > c->capacity) {
        struct sl_leaf *e = SL_CONTAINER_OF(c->recent.prev, struct sl_leaf, recency);

        SL_BUG_ON(sl_list_empty(&c->recent));
        sl_list_remove(&e->recency);
        table_remove(c, e);
        atomic_fetch_sub_explicit(&c->entries, 1, memory_order_relaxed);
        count(&c->evictions);
        e->next_dead = dead;
        dead = e;
    }
    return dead;
}

/* Answers from an entry found in the table: at once when it is minted, otherwise after waiting
 * for the thread that mints it. Unlocks. */
static int join(struct sl_leaf_cache *c, struct sl_leaf *e, struct sl_leaf **out, char *err,
                size_t errlen)
{
    int rc;

    if (e->state == LEAF_READY) {
        recency_touch(c, e);
        *out = sl_leaf_ref(e);
        pthread_mutex_unlock(&c->lock);
        count(&c->hits);
        return 0;
    }
    count(&c->misses);
    /* Our own reference keeps a failed entry readable after the table lets go of it. */
    sl_leaf_ref(e);
    while (e->state == LEAF_MINTING) {
        pthread_cond_wait(&c->minted, &c->lock);
    }
    if (e->state == LEAF_READY) {
        pthread_mutex_unlock(&c->lock);
        *out = e;
        return 0;
    }
    rc = e->rc;
    copy_err(err, errlen, e->err != NULL ? e->err : sl_strerror(rc));
    pthread_mutex_unlock(&c->lock);
    sl_leaf_unref(e);
    return rc;
}

/* Mints the leaf of the in-flight entry `e`, which this thread put in the table and holds a
 * reference to, then publishes the result to the table and to the threads that wait. Takes the
 * lock itself. */
static int mint_entry(struct sl_leaf_cache *c, struct sl_leaf *e, struct sl_leaf **out, char *err,
                      size_t errlen)
{
    EVP_PKEY *key = sl_minter_leaf_key(c->minter);
    struct sl_leaf *dead = NULL;
    char msg[ERR_BYTES] = "";
    EVP_PKEY *key_ref = NULL;
    X509 *cert = NULL;
    void *ctx = NULL;
    int rc;

    rc = sl_minter_mint(c->minter, e->host, &cert, msg, sizeof(msg));
    if (rc == 0) {
        if (EVP_PKEY_up_ref(key) == 1) {
            key_ref = key;
        } else {
            sl__certs_seterr(msg, sizeof(msg), "cannot mint a certificate for %s", e->host);
            rc = SL_ECRYPTO;
        }
    }
    if (rc == 0 && c->ctx_fn != NULL) {
        rc = c->ctx_fn(cert, key, c->ctx_arg, &ctx);
        if (rc < 0) {
            (void)snprintf(msg, sizeof(msg), "cannot set up TLS for %s: %s", e->host,
                           sl_strerror(rc));
            ctx = NULL;
        } else {
            rc = 0;
        }
    }

    pthread_mutex_lock(&c->lock);
    if (rc == 0) {
        e->cert = cert;
        e->key = key_ref;
        e->ctx = ctx;
        e->state = LEAF_READY;
        sl_list_push_front(&c->recent, &e->recency);
        atomic_fetch_add_explicit(&c->entries, 1, memory_order_relaxed);
        dead = evict(c);
        count(&c->mints);
    } else {
        e->state = LEAF_FAILED;
        e->rc = rc;
        e->err = sl_strdup(msg);
        table_remove(c, e);
        count(&c->mint_errors);
    }
    pthread_cond_broadcast(&c->minted);
    pthread_mutex_unlock(&c->lock);

    while (dead != NULL) {
        struct sl_leaf *next = dead->next_dead;

        sl_leaf_unref(dead);
        dead = next;
    }
    if (rc == 0) {
        *out = e;
        return 0;
    }
    X509_free(cert);
    EVP_PKEY_free(key_ref);
    copy_err(err, errlen, msg);
    sl_leaf_unref(e); /* the table's reference */
    sl_leaf_unref(e); /* ours */
    return rc;
}

int sl_leaf_cache_get(struct sl_leaf_cache *c, const char *host, struct sl_leaf **out, char *err,
                      size_t errlen)
{
    size_t n = strnlen(host, SL_MINT_HOST_MAX + 1);
    struct sl_leaf *fresh;
    struct sl_leaf *e;
    uint64_t hash;
    int rc;

    if (n == 0 || n > SL_MINT_HOST_MAX) {
        sl__certs_seterr(err, errlen, "cannot mint: the host is empty or longer than %d bytes",
                         SL_MINT_HOST_MAX);
        return SL_EINVAL;
    }
    hash = sl_siphash24(c->hash_key, host, n);
    pthread_mutex_lock(&c->lock);
    e = table_find(c, host, n, hash);
    if (e != NULL) {
        return join(c, e, out, err, errlen);
    }
    pthread_mutex_unlock(&c->lock);

    /* Allocate without the lock, then look again: another thread may have begun meanwhile. */
    fresh = leaf_new(c, host, n, hash);
    if (fresh == NULL) {
        sl__certs_seterr(err, errlen, "cannot mint a certificate: out of memory");
        return SL_ENOMEM;
    }
    pthread_mutex_lock(&c->lock);
    e = table_find(c, host, n, hash);
    if (e != NULL) {
        rc = join(c, e, out, err, errlen);
        leaf_free(fresh);
        return rc;
    }
    table_insert(c, fresh);
    pthread_mutex_unlock(&c->lock);
    count(&c->misses);
    return mint_entry(c, fresh, out, err, errlen);
}

struct sl_leaf *sl_leaf_cache_lookup(struct sl_leaf_cache *c, const char *host)
{
    size_t n = strnlen(host, SL_MINT_HOST_MAX + 1);
    struct sl_leaf *e;
    uint64_t hash;

    if (n == 0 || n > SL_MINT_HOST_MAX) {
        return NULL;
    }
    hash = sl_siphash24(c->hash_key, host, n);
    pthread_mutex_lock(&c->lock);
    e = table_find(c, host, n, hash);
    if (e != NULL && e->state == LEAF_READY) {
        recency_touch(c, e);
        sl_leaf_ref(e);
    } else {
        e = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    if (e != NULL) {
        count(&c->hits);
    }
    return e;
}
