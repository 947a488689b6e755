/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/firewall.h - the host firewall rules sluice owns (docs/reference/containers.md
 * §5.4): an nftables table of its own that lets the sandbox bridge reach the proxy port on the
 * gateway address and nothing else, on the host or beyond it.
 *
 * Docker's internal networks only filter forwarded traffic; a sandbox could otherwise reach
 * every host service on every host address through INPUT. The table (family inet, so IPv6 is
 * covered too) has two base chains at priority filter - 10:
 *   input    from the bridge: replies accept, TCP to GATEWAY:PORT accept, everything else
 *            rejected at once (TCP reset, ICMP admin-prohibited otherwise);
 *   forward  everything from the bridge rejected the same way, and everything to the bridge
 *            that is not a reply rejected (nothing on the host's other side may open a
 *            connection to a sandbox).
 * In nftables a reject in any base chain is final, so rules of other tables (Docker's) cannot
 * undo it. Interfaces match by name (iifname), which survives the bridge being recreated.
 *
 * Everything goes through libnftables in this process (no `nft` child). Install, remove and
 * the listing are blocking netlink calls: the control plane makes them at start-up and at
 * shutdown, before and after its loop runs, never on the loop thread. They need
 * CAP_NET_ADMIN.
 */
#ifndef SL_CONTROL_SANDBOX_FIREWALL_H
#define SL_CONTROL_SANDBOX_FIREWALL_H

#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

/* Room for a table name and its terminator: "sluice_" and at most 56 more characters. */
#define SL_FIREWALL_TABLE_CAP 64

struct sl_firewall_config {
    /* The table: "sluice_" followed by zero or more of [A-Za-z0-9_], shorter than
     * SL_FIREWALL_TABLE_CAP (sl_firewall_table_name() makes one). The prefix marks the tables
     * sluice owns and keeps the name clear of nft keywords. Borrowed. */
    const char *table;
    /* The sandbox bridge's interface name: 1-15 characters of [A-Za-z0-9_.-]. Borrowed. */
    const char *bridge;
    /* The gateway's IPv4 address in dotted form, where the proxy listens. Borrowed. */
    const char *gateway;
    /* The proxy's TCP port on the gateway, 1-65535. */
    unsigned proxy_port;
};

/* Writes the ruleset text for `cfg` (the `table inet ... { ... }` block, as nft reads it)
 * to `out`, which the caller initialised; text already there stays in front. Pure: no
 * netlink. Returns 0, SL_EINVAL when a field of `cfg` breaks its rule above (nothing is
 * written then), or the error of sl_buf_printf() (SL_ETOOBIG, SL_ENOMEM). */
SL_MUST_CHECK int sl_firewall_render(const struct sl_firewall_config *cfg, struct sl_buf *out);

/* Installs the table for `cfg`, replacing a table of that name if there is one, in one
 * nftables transaction (the old rules stay in force until the new ones are). Idempotent.
 * Returns 0; SL_EINVAL for a bad `cfg` (message in `err`, nothing sent to the kernel);
 * SL_ENOMEM; or SL_EIO when the kernel refused the batch (no rights, no nf_tables), with
 * nftables' own message in `err`. `err` (may be NULL when `cap` is 0) gets a one-line
 * message on failure. */
SL_MUST_CHECK int sl_firewall_install(const struct sl_firewall_config *cfg, char *err, size_t cap);

/* Removes the table `table` (same name rule as the config's). A table that is not there is
 * success. Returns 0, SL_EINVAL, SL_ENOMEM or SL_EIO as sl_firewall_install(). */
SL_MUST_CHECK int sl_firewall_remove(const char *table, char *err, size_t cap);

/* Writes the table name of the network named `network` (NULL is "") to `out`, `cap` bytes:
 * "sluice_" + the name with every character outside [A-Za-z0-9_] replaced by '_', cut to
 * SL_FIREWALL_TABLE_CAP - 1 characters (or to fit a smaller `cap`; nothing when cap is 0).
 * With cap >= SL_FIREWALL_TABLE_CAP the result always passes the table name rule. Different
 * names can share a table ("a-b" and "a.b"). */
void sl_firewall_table_name(const char *network, char *out, size_t cap);

#endif
