/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/dns.h - DNS name resolution for one worker: the system resolver off the event loop
 * (uv_getaddrinfo runs on libuv's thread pool), a short cache, and `--resolve` pins.
 *
 * The resolver only resolves; it never decides whether an address may be dialled. Its answer
 * is the complete list the caller will try, in order, and the caller checks every address
 * before dialling it (proxy/addr.h), so the address checked is the address dialled: there is
 * never a second lookup between the check and the connect (docs/reference/proxy.md §4.4).
 *
 * Concurrent lookups of one name on one worker share a single getaddrinfo() call. Answers are
 * cached for `ttl_ms` (failures for `negative_ttl_ms`); the cache holds at most `max_entries`
 * names and forgets the oldest first.
 *
 * Lifecycle: sl_dns_create() on the worker's loop -> sl_dns_lookup() / sl_dns_cancel() on that
 * loop's thread -> sl_dns_close(): lookups still running finish first; the resolver frees itself
 * after the last one (their callbacks are not called).
 */
#ifndef SL_PROXY_DNS_H
#define SL_PROXY_DNS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <uv.h>

#include "base/err.h"

/* Most addresses kept per answer. */
#define SL_ADDRS_MAX 8

/* A resolution result: addresses to try, in order, with the requested port filled in. */
struct sl_addrs {
    size_t n;
    struct sockaddr_storage a[SL_ADDRS_MAX];
};

/* A `--resolve HOST:PORT:ADDR` pin. */
struct sl_dns_pin {
    /* Normalised host name (policy/host.h), NUL-terminated. */
    char host[256];
    uint16_t port;
    struct sockaddr_storage addr;
};

/* Parses a `--resolve HOST:PORT:ADDR` argument (ADDR an IPv4 or bracketed/bare IPv6 literal).
 * On failure writes a message naming the problem into `err`. */
SL_MUST_CHECK int sl_dns_pin_parse(const char *arg, struct sl_dns_pin *out, char *err,
                                   size_t errlen);

struct sl_dns_config {
    /* Pins, consulted before the cache; borrowed, must outlive the resolver. */
    const struct sl_dns_pin *pins;
    size_t n_pins;
    /* Cache lifetimes; 0 means 30 000 ms and 5 000 ms. */
    uint64_t ttl_ms;
    uint64_t negative_ttl_ms;
    /* Most cached names; 0 means 4096. */
    size_t max_entries;
};

struct sl_dns;     /* opaque, one per worker loop */
struct sl_dns_req; /* opaque, one pending lookup of one caller */

/* Called once on the loop thread with the outcome: 0 and the addresses (borrowed for the call),
 * or a negative code (UV_EAI_* from getaddrinfo, SL_ENOTFOUND for an empty answer). */
typedef void sl_dns_answer_fn(void *arg, int status, const struct sl_addrs *addrs);

SL_MUST_CHECK int sl_dns_create(uv_loop_t *loop, const struct sl_dns_config *cfg,
                                struct sl_dns **out);

/* Starts closing; see the lifecycle above. NULL is a no-op. */
void sl_dns_close(struct sl_dns *r);

/* Resolves `host` (a normalised DNS name; borrowed) for `port`.
 *   returns 1: answered from a pin or the cache; `*addrs` is filled, no callback follows;
 *   returns 0: pending; `cb(arg, ...)` is called later unless sl_dns_cancel(*req) is called
 *              first; `*req` identifies the lookup until then;
 *   returns <0: failed at once (a cached failure, or out of memory); no callback follows.
 * Never calls `cb` synchronously. */
SL_MUST_CHECK int sl_dns_lookup(struct sl_dns *r, const char *host, uint16_t port,
                                struct sl_addrs *addrs, sl_dns_answer_fn *cb, void *arg,
                                struct sl_dns_req **req);

/* Withdraws a pending lookup: its callback will not be called. `req` is invalid afterwards. */
void sl_dns_cancel(struct sl_dns_req *req);

/* Cache counters, for metrics. */
struct sl_dns_stats {
    uint64_t hits;
    uint64_t misses;
    uint64_t failures;
};

void sl_dns_stats(const struct sl_dns *r, struct sl_dns_stats *out);

#endif
