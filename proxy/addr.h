/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/addr.h - may the proxy dial this address? (docs/reference/proxy.md §4.4)
 *
 * Every address the proxy is about to connect to, whether a resolver answer or an IP literal, is
 * checked here first, exactly as it will be dialled. An address is refused when it is in a
 * class that reaches the proxy's own host or network rather than the internet:
 *
 *   class        IPv4                                   IPv6
 *   unspecified  0.0.0.0/8                              ::/128
 *   loopback     127.0.0.0/8                            ::1/128
 *   private      10/8, 172.16/12, 192.168/16            fc00::/7 (ULA), fec0::/10 (site-local)
 *   link-local   169.254.0.0/16 (incl. 169.254.169.254) fe80::/10
 *   cgnat        100.64.0.0/10
 *   multicast    224.0.0.0/4                            ff00::/8
 *   broadcast    255.255.255.255
 *   reserved     240.0.0.0/4, 192.0.0.0/24 (IETF        100::/64 (discard-only), the rest of
 *                protocol assignments)                  ::/8 not listed below
 *
 * IPv6 forms that carry an IPv4 address are judged by that address, because a translator or a
 * dual-stack socket delivers them there:
 *   ::ffff:0:0/96     IPv4-mapped: is the IPv4 address in every respect (classes, allow and deny
 *                     entries alike); a dual-stack socket dials the IPv4 address itself;
 *   ::/96             IPv4-compatible (deprecated), and ::ffff:0:0:0/96 IPv4-translated (SIIT);
 *   64:ff9b::/96      NAT64 well-known prefix (RFC 6052): the last 32 bits;
 *   64:ff9b:1::/48    NAT64 local-use prefix (RFC 8215): the operator may embed the IPv4
 *                     address at any RFC 6052 position its prefix length allows (/48, /56, /64
 *                     or /96), so every one of the four positions is checked and the address is
 *                     refused when any of them is in a refused class (fail closed; the class
 *                     reported is that of the first refused one in the order /96, /64, /56,
 *                     /48). In practice this refuses most of the prefix: a site that dials out
 *                     through its own translator allows the translator's prefix explicitly;
 *   2002::/16         6to4: the relay's IPv4 address in bits 16-47;
 *   2001::/32         Teredo: refused when the server (bits 32-63) or the client (the last 32
 *                     bits, inverted) address is in a refused class.
 * These forms are refused with the class of the embedded address. An --allow-upstream range
 * lifts them only when it covers the IPv6 address as dialled (or, for IPv4-mapped addresses, the
 * IPv4 address).
 *
 * Documentation and benchmarking ranges (192.0.2/24, 198.51.100/24, 203.0.113/24, 198.18/15,
 * 2001:db8::/32, 2001:2::/48) are allowed: nothing routes them to the proxy's own network, and
 * test setups use them.
 *
 * The policy adds two lists to the classes:
 *   allow (--allow-upstream CIDR): an address inside one of these is allowed even when its
 *     class is refused;
 *   deny (--deny-upstream ADDR[:PORT], and the proxy's own listen addresses): an address equal to
 *     an entry, on the entry's port when it names one, is refused as "denied"; deny wins over
 *     every allow. An IPv6 address that embeds an IPv4 address (above) is also denied when that
 *     IPv4 address is. Entries match single addresses, but for a wildcard (0.0.0.0, ::, with
 *     or without a port): a listener there answers on every loopback address too, so it also
 *     denies 127.0.0.0/8 (both) and ::1 (::) on its port. The host's other addresses are not
 *     known here: expand a wildcard into the interface addresses and add those as well.
 * IP literals in other spellings (2130706433, 0x7f.1, 0177.0.0.1) are the host parser's job: it
 * must turn them into the address that will be dialled before this check.
 *
 * Lifecycle: sl_addr_policy_create() -> sl_addr_policy_add_allow()/_add_deny() at startup ->
 * sl_addr_check() from any number of threads (the policy is read-only by then) ->
 * sl_addr_policy_destroy().
 */
#ifndef SL_PROXY_ADDR_H
#define SL_PROXY_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/err.h"

struct sl_addr_policy; /* opaque */

/* Most entries of each list (allow, deny) a policy takes. */
#define SL_ADDR_POLICY_MAX_ENTRIES 4096u

/* The verdict on one address. Everything but SL_ADDR_ALLOWED is a refusal (reason
 * `private-address`); sl_addr_verdict_name() gives the class for the audit log. */
enum sl_addr_verdict {
    SL_ADDR_ALLOWED = 0,
    SL_ADDR_UNSPECIFIED,
    SL_ADDR_LOOPBACK,
    SL_ADDR_PRIVATE,
    SL_ADDR_LINK_LOCAL,
    SL_ADDR_CGNAT,
    SL_ADDR_MULTICAST,
    SL_ADDR_BROADCAST,
    SL_ADDR_RESERVED,
    /* Matches a deny entry. */
    SL_ADDR_DENIED,
    /* Not AF_INET or AF_INET6. */
    SL_ADDR_UNSUPPORTED,
};

/* A parsed CIDR range; a value type. */
struct sl_addr_cidr {
    /* AF_INET or AF_INET6. */
    int family;
    /* Prefix length in bits: 0-32 for AF_INET, 0-128 for AF_INET6. */
    unsigned prefix_bits;
    /* The network address in network byte order (the first 4 bytes for AF_INET); every bit
     * past prefix_bits is zero. */
    uint8_t bytes[16];
};

/* Parses "ADDR/BITS" (or a bare address, meaning /32 or /128) strictly: ADDR in the inet_pton
 * forms only (dotted quad without leading zeros, or RFC 4291 text without a zone), BITS plain
 * decimal within the family's range, no host bits set past the prefix, nothing before or
 * after. An IPv6 range inside ::ffff:0:0/96 (prefix of 96 or more) becomes the IPv4 range it
 * maps. Borrows `s`. Returns 0, or SL_EINVAL with a one-line reason in `err` (e.g.
 * `"10.0.0.0/33": prefix length 33 is out of range 0-32`); `*out` is untouched on failure. */
SL_MUST_CHECK int sl_addr_parse_cidr(const char *s, struct sl_addr_cidr *out, char *err,
                                     size_t errlen);

/* Creates a policy with empty lists (the classes alone). On success `*out` is owned by the
 * caller. Returns 0 or SL_ENOMEM. */
SL_MUST_CHECK int sl_addr_policy_create(struct sl_addr_policy **out);

/* Frees the policy. NULL is a no-op. */
void sl_addr_policy_destroy(struct sl_addr_policy *p);

/* Adds an allow range in sl_addr_parse_cidr() syntax. Borrows `cidr`. Returns 0, SL_EINVAL
 * (reason in `err`), SL_ETOOBIG (more than SL_ADDR_POLICY_MAX_ENTRIES) or SL_ENOMEM; the policy
 * is unchanged on failure. */
SL_MUST_CHECK int sl_addr_policy_add_allow(struct sl_addr_policy *p, const char *cidr, char *err,
                                           size_t errlen);

/* Adds a deny entry: "1.2.3.4", "1.2.3.4:8080", "::1", "[::1]" or "[::1]:8080" (an IPv6
 * address with a port needs the brackets). Addresses as for sl_addr_parse_cidr(); the port is
 * plain decimal 1-65535. Borrows `entry`. Results as for sl_addr_policy_add_allow(). */
SL_MUST_CHECK int sl_addr_policy_add_deny(struct sl_addr_policy *p, const char *entry, char *err,
                                          size_t errlen);

/* Judges `sa`, an AF_INET or AF_INET6 socket address (borrowed; its port is the port that will
 * be dialled). `p` may be NULL for the classes alone. Never allocates; safe from any thread. */
enum sl_addr_verdict sl_addr_check(const struct sl_addr_policy *p, const struct sockaddr *sa);

/* The verdict's name for logs: "allowed", "unspecified", "loopback", "private", "link-local",
 * "cgnat", "multicast", "broadcast", "reserved", "denied" or "unsupported-family". */
const char *sl_addr_verdict_name(enum sl_addr_verdict v);

/* True when `cidr` contains the address `bytes` of `family` (4 or 16 bytes, network order). */
bool sl_addr_cidr_contains(const struct sl_addr_cidr *cidr, int family, const uint8_t *bytes);

#endif
