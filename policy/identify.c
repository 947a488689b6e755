/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/identify.c - sl_policy_identify(): from credentials and source address to a client.
 *
 * With credentials: one lookup by id. Without: one lookup of the exact address, then one per
 * distinct CIDR prefix length present in the snapshot (at most 33 or 129), longest first.
 * sl_policy_identify_address() is the same address walk, token clients with an `ip` included.
 */
#include <netinet/in.h>
#include <string.h>

#include "policy/auth.h"
#include "policy/decision.h"
#include "policy/snapshot_int.h"

#define NO_NEXT UINT32_MAX

/* Reads `src` into family 4/6 and 16 address bytes; an IPv4-mapped IPv6 address becomes IPv4.
 * Returns the family, or 0 for none or an unknown family. */
static int read_source(const struct sockaddr *src, uint8_t addr[16])
{
    static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

    memset(addr, 0, 16);
    if (src == NULL) {
        return 0;
    }
    if (src->sa_family == AF_INET) {
        struct sockaddr_in sin;

        memcpy(&sin, src, sizeof(sin));
        memcpy(addr, &sin.sin_addr, 4);
        return 4;
    }
    if (src->sa_family == AF_INET6) {
        struct sockaddr_in6 sin6;

        memcpy(&sin6, src, sizeof(sin6));
        if (memcmp(sin6.sin6_addr.s6_addr, mapped, sizeof(mapped)) == 0) {
            memcpy(addr, sin6.sin6_addr.s6_addr + 12, 4);
            return 4;
        }
        memcpy(addr, sin6.sin6_addr.s6_addr, 16);
        return 6;
    }
    return 0;
}

/* Does `key` (a network, host bits zero) contain the address? */
static bool key_contains(const struct sl__addr_key *key, int family, const uint8_t addr[16])
{
    struct sl__addr_key k;

    if (key->b[0] != family) {
        return false;
    }
    sl__addr_key_set(&k, family, addr, key->b[1]);
    return memcmp(k.b, key->b, sizeof(k.b)) == 0;
}

/* The ip and cidr conditions of `c`, for whichever of them it has. */
static bool source_holds(const struct sl_client *c, int family, const uint8_t addr[16])
{
    if (c->has_ip && !key_contains(&c->ip, family, addr)) {
        return false;
    }
    return !c->has_cidr || key_contains(&c->cidr, family, addr);
}

static const struct sl_client *by_token(const struct sl_snapshot *s, const char *id,
                                        const char *token, int family, const uint8_t addr[16])
{
    const struct sl_client *c = sl_snapshot_find_client(s, id);

    if (c == NULL || c->token == NULL) {
        return NULL;
    }
    if (!sl_auth_equal(sl_slice_str(token), sl_slice_of(c->token, c->token_len))) {
        return NULL;
    }
    return source_holds(c, family, addr) ? c : NULL;
}

/* The client the address names: the first with that `ip` (token clients only when
 * `with_token`) whose `cidr` also holds, else the longest `cidr` of a client without token and
 * `ip`. */
static const struct sl_client *by_address(const struct sl_snapshot *s, int family,
                                          const uint8_t addr[16], bool with_token)
{
    const uint8_t *prefixes = family == 4 ? s->v4_prefixes : s->v6_prefixes;
    uint8_t n = family == 4 ? s->n_v4_prefixes : s->n_v6_prefixes;
    struct sl__addr_key k;
    const struct sl__slot *slot;

    sl__addr_key_set(&k, family, addr, family == 4 ? 32 : 128);
    slot = sl__table_find(&s->client_by_ip, sl__hash(k.b, sizeof(k.b)), k.b, sizeof(k.b));
    for (uint32_t i = slot != NULL ? slot->first : NO_NEXT; i != NO_NEXT;
         i = s->clients[i].next_same_ip) {
        if ((with_token || s->clients[i].token == NULL)
            && source_holds(&s->clients[i], family, addr)) {
            return &s->clients[i];
        }
    }
    /* Clients in the cidr table have no ip and no token, so the network match is all. */
    for (uint8_t j = 0; j < n; j++) {
        sl__addr_key_set(&k, family, addr, prefixes[j]);
        slot = sl__table_find(&s->client_by_cidr, sl__hash(k.b, sizeof(k.b)), k.b, sizeof(k.b));
        if (slot != NULL) {
            return &s->clients[slot->first];
        }
    }
    return NULL;
}

const struct sl_client *sl_policy_identify(const struct sl_snapshot *s, const char *id,
                                           const char *token, const struct sockaddr *src)
{
    uint8_t addr[16];
    int family;

    if (s == NULL) {
        return NULL;
    }
    family = read_source(src, addr);
    if (id != NULL || token != NULL) {
        if (id == NULL || token == NULL) {
            return NULL;
        }
        return by_token(s, id, token, family, addr);
    }
    if (family == 0) {
        return NULL;
    }
    return by_address(s, family, addr, false);
}

const struct sl_client *sl_policy_identify_address(const struct sl_snapshot *s,
                                                   const struct sockaddr *src)
{
    uint8_t addr[16];
    int family;

    if (s == NULL) {
        return NULL;
    }
    family = read_source(src, addr);
    if (family == 0) {
        return NULL;
    }
    return by_address(s, family, addr, true);
}
