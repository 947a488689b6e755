/* SPDX-License-Identifier: Apache-2.0 */
/*
 * certs/cache.h - the bounded, thread-safe cache of minted leaves, keyed by host.
 *
 * Every worker of the proxy asks one cache for the leaf of the host it intercepts, and the same
 * host gets the same certificate until its entry is evicted. An entry (struct sl_leaf) is an
 * immutable, reference-counted object: whoever uses the certificate holds a reference, so an
 * entry evicted meanwhile stays valid until its last reference goes.
 *
 * A miss mints exactly once: the first thread to miss a host puts an in-flight entry in the table
 * and mints outside the lock; the threads that miss the same host meanwhile wait for its result
 * (the leaf, or the same error). At most `capacity` minted entries stay in the table; past it the
 * least recently used one is dropped. A failed mint is not cached: the next request tries again.
 *
 * The proxy's event loop never blocks on a mint: it calls sl_leaf_cache_lookup(), which answers
 * hits only, and hands a miss to a worker thread that calls sl_leaf_cache_get(). The lock the
 * lookup takes is only ever held for a table lookup and list updates, never for minting or for
 * the attachment hook.
 *
 * Hosts are keys exactly as given: callers normalise them first (docs/reference/proxy.md §4.3:
 * lowercase, no trailing dot), which the minter checks (certs/mint.h). The table hashes them with a
 * keyed hash seeded at random, so clients cannot choose names that share one chain.
 *
 * Optionally every entry carries an attachment built once per mint by a caller hook (the tests
 * use it to hold or fail a mint). The proxy uses none: it sets the leaf's certificate and the
 * shared key on each intercepted connection, so an entry costs a few KiB, not a TLS context.
 * The hook runs outside the lock, on the minting thread.
 *
 * Lifecycle: sl_leaf_cache_create() -> sl_leaf_cache_get()/lookup() from any thread ->
 * sl_leaf_cache_destroy() once no thread is inside the cache. Leaves still referenced then stay
 * valid; release each with sl_leaf_unref().
 */
#ifndef SL_CERTS_CACHE_H
#define SL_CERTS_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "base/err.h"
#include "certs/mint.h"

#define SL_LEAF_CACHE_DEFAULT_CAPACITY 10000
/* Largest capacity accepted; the hash table is sized for it up front. */
#define SL_LEAF_CACHE_MAX_CAPACITY (1u << 20)

struct sl_leaf;       /* opaque: one cached leaf */
struct sl_leaf_cache; /* opaque */

/* Builds the attachment of a new leaf, e.g. an SSL_CTX serving `cert` with `key`. Borrows `cert`
 * and `key` (take references to keep them). On success returns 0 and stores the attachment, which
 * the leaf then owns, in `*out`; on failure returns a negative code (sl_strerror() names it) and
 * the mint fails with it. Runs on the thread that mints, with no lock held; must not call into
 * the cache. */
typedef int sl_leaf_ctx_fn(X509 *cert, EVP_PKEY *key, void *arg, void **out);

/* Frees an attachment made by an sl_leaf_ctx_fn, when the leaf's last reference goes (on
 * whichever thread drops it, possibly after sl_leaf_cache_destroy()). */
typedef void sl_leaf_ctx_free_fn(void *ctx, void *arg);

struct sl_leaf_cache_config {
    /* Most minted entries kept, 1 ... SL_LEAF_CACHE_MAX_CAPACITY; 0 means the default. */
    size_t capacity;
    /* Optional attachment hook; NULL for none (sl_leaf_ctx() is then NULL). */
    sl_leaf_ctx_fn *ctx_fn;
    /* Frees attachments; may be NULL when they need no freeing. */
    sl_leaf_ctx_free_fn *ctx_free_fn;
    /* Passed to both hooks; borrowed, and must outlive every leaf. */
    void *ctx_arg;
};

/* Counters since creation. Each is read atomically, but not all at the same instant. */
struct sl_leaf_cache_stats {
    /* Requests answered by a minted entry (sl_leaf_cache_get() and sl_leaf_cache_lookup()). */
    uint64_t hits;
    /* sl_leaf_cache_get() calls that found no minted entry, whether they minted or waited for
     * another thread's mint. A lookup that returns NULL counts nothing: its caller follows it
     * with sl_leaf_cache_get(). */
    uint64_t misses;
    /* Leaves minted and cached. */
    uint64_t mints;
    /* Mints that failed (bad host, CA expired, hook error, out of memory). */
    uint64_t mint_errors;
    /* Entries dropped to stay within capacity. */
    uint64_t evictions;
    /* Minted entries in the table now. */
    size_t entries;
    /* The configured capacity. */
    size_t capacity;
};

/* Creates an empty cache that mints with `m`. Borrows `m`, which must outlive the cache; borrows
 * `cfg` (NULL for the defaults) during the call only. On success `*out` is owned by the caller.
 * Returns 0, SL_EINVAL (capacity too large), SL_ENOMEM, SL_ECRYPTO (no random seed) or a
 * negative errno from pthreads. */
SL_MUST_CHECK int sl_leaf_cache_create(const struct sl_minter *m,
                                       const struct sl_leaf_cache_config *cfg,
                                       struct sl_leaf_cache **out);

/* Drops the cache's references to its entries and frees it. No thread may be inside the cache,
 * and none may enter it after. NULL is a no-op. */
void sl_leaf_cache_destroy(struct sl_leaf_cache *c);

/* Returns the leaf for `host` in `*out`, minting it on a miss; blocks while this or another
 * thread mints. Borrows `host`. On success `*out` is a new reference (release it with
 * sl_leaf_unref()); on failure `*out` is untouched and `err` says why. Returns 0, SL_EINVAL,
 * SL_ENOMEM, SL_ECRYPTO, or the code of the attachment hook. Never call it on an event loop. */
SL_MUST_CHECK int sl_leaf_cache_get(struct sl_leaf_cache *c, const char *host, struct sl_leaf **out,
                                    char *err, size_t errlen);

/* Returns a new reference to the minted leaf for `host`, or NULL when there is none yet (also
 * while one is being minted). Never mints and never waits for a mint. Borrows `host`. */
SL_MUST_CHECK struct sl_leaf *sl_leaf_cache_lookup(struct sl_leaf_cache *c, const char *host);

/* Copies the counters into `*out`. Any thread, any time. */
void sl_leaf_cache_stats(struct sl_leaf_cache *c, struct sl_leaf_cache_stats *out);

/* Takes one more reference to `l` and returns `l`. Any thread. */
struct sl_leaf *sl_leaf_ref(struct sl_leaf *l);

/* Drops one reference; the last one frees the leaf (and its attachment). NULL is a no-op. */
void sl_leaf_unref(struct sl_leaf *l);

/* The leaf's certificate; borrowed from `l`, valid while the caller holds its reference. Not to
 * be changed: other threads read it at the same time. */
X509 *sl_leaf_cert(const struct sl_leaf *l);

/* The key the certificate certifies (the minter's shared leaf key); borrowed like the cert. */
EVP_PKEY *sl_leaf_key(const struct sl_leaf *l);

/* The attachment built by the cache's sl_leaf_ctx_fn, or NULL; borrowed like the cert. */
void *sl_leaf_ctx(const struct sl_leaf *l);

/* The host the leaf was minted for, NUL-terminated; borrowed like the cert. */
const char *sl_leaf_host(const struct sl_leaf *l);

#endif
