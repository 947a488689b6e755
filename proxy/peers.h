/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/peers.h - client connections open per source address, against
 * `--max-connections-per-client` (docs/reference/proxy.md §4.10): one sandbox (one address)
 * cannot hold every slot of `--max-connections` and starve the others.
 *
 * A fixed open-addressing table (linear probing, keyed SipHash, deletion by backward shift: no
 * tombstones), allocated once with room for twice `holders` addresses and never grown: the
 * proxy's accept path takes a slot only for a connection it counted within --max-connections,
 * so at most that many addresses hold slots at once and the table is never more than half full.
 * Take and release are O(1) on average, allocate nothing and are thread-safe (one mutex: the
 * workers accept on their own threads). An address is its IP alone, the port ignored; an
 * IPv4-mapped IPv6 address (::ffff:a.b.c.d, a dual-stack listener's IPv4 clients) is the IPv4
 * address.
 */
#ifndef SL_PROXY_PEERS_H
#define SL_PROXY_PEERS_H

#include <stdbool.h>
#include <sys/socket.h>

#include "base/err.h"

struct sl_peers;

/* A table for `holders` addresses holding slots at once (>= 1), each up to `cap` (>= 1). Returns
 * 0, SL_EINVAL or SL_ENOMEM. */
SL_MUST_CHECK int sl_peers_new(unsigned holders, unsigned cap, struct sl_peers **out);

/* NULL is fine. */
void sl_peers_free(struct sl_peers *t);

/* Takes one of `addr`'s slots: true when it held fewer than `cap` (the caller then calls
 * sl_peers_release() once for it), false when it holds `cap` already, or when the table has no
 * room for one more address (more than `holders` at once: a caller's bug; refused, never
 * let through), or for an address that is neither IPv4 nor IPv6. Nothing is taken then. */
bool sl_peers_take(struct sl_peers *t, const struct sockaddr *addr);

/* Gives back a slot sl_peers_take() gave for `addr` (the same address). */
void sl_peers_release(struct sl_peers *t, const struct sockaddr *addr);

/* The slots `addr` holds now. */
unsigned sl_peers_count(struct sl_peers *t, const struct sockaddr *addr);

/* Addresses holding at least one slot now. */
unsigned sl_peers_addresses(struct sl_peers *t);

#endif
