/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/firewall.h - the two walls around the sandboxes, in nftables
 * (docs/reference/containers.md §5.4).
 *
 * The host table. Docker's internal networks only filter forwarded traffic; a sandbox could
 * otherwise reach every host service on every host address through INPUT. sluice's own table
 * (family inet, so IPv6 is covered too) lets the sandbox bridge reach sluice's ports on the
 * gateway address and nothing else, on the host or beyond it:
 *   set redirect_ports  the TCP ports the rules of the network's environments name (host:PORT),
 *            other than sluice's own; the control plane replaces its elements after every
 *            snapshot build (sl_firewall_set_redirect_ports); empty at install;
 *   prerouting (nat, priority dstnat - 10, before Docker's): TCP from the bridge to
 *            GATEWAY:PORT with PORT in redirect_ports is redirected to the redirect port, where
 *            the proxy's transparent listener reads the original port (SO_ORIGINAL_DST);
 *   input    (filter - 10) from the bridge: replies accept; TCP to GATEWAY on the proxy port, 53,
 *            80, 443 and the redirect port accept; UDP to GATEWAY:53 accept; everything else
 *            rejected at once (TCP reset, ICMP admin-prohibited otherwise);
 *   forward  (filter - 10) everything from the bridge rejected the same way, and everything to
 *            the bridge that is not a reply rejected (nothing on the host's other side may open
 *            a connection to a sandbox).
 * In nftables a reject in any base chain is final, so rules of other tables (Docker's) cannot
 * undo it. Interfaces match by name (iifname), which survives the bridge being recreated.
 *
 * The inner wall. The table inet sluice_wall inside each container's own network namespace,
 * installed before anything of the image runs there (the container has no CAP_NET_ADMIN, so it
 * cannot change it); each wall holds without the other:
 *   output   (filter - 10, policy drop): 127.0.0.11 (Docker's embedded DNS, which Docker's own
 *            nat rules in the namespace send to its resolver) rejected; the loopback accepted;
 *            replies accepted; TCP and UDP to the gateway on the ports given accepted; anything
 *            else (TCP, UDP, ICMP, IPv4 or IPv6) rejected at once;
 *   input    (filter - 10, policy drop): the loopback and replies accepted, anything else
 *            rejected at once.
 *
 * Everything goes through libnftables in this process (no `nft` child). Every call below but
 * the renderers and sl_firewall_table_name() is a blocking netlink call: the control plane makes
 * them before and after its loop runs, or on the thread pool, never on the loop thread. They
 * need CAP_NET_ADMIN; sl_firewall_wall_install() also CAP_SYS_ADMIN (setns).
 */
#ifndef SL_CONTROL_SANDBOX_FIREWALL_H
#define SL_CONTROL_SANDBOX_FIREWALL_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

/* Room for a table name and its terminator: "sluice_" and at most 56 more characters. */
#define SL_FIREWALL_TABLE_CAP 64
/* sluice's fixed ports on the gateway: DNS (UDP and TCP) and the transparent HTTP and TLS
 * listeners. */
#define SL_FIREWALL_DNS_PORT   53u
#define SL_FIREWALL_HTTP_PORT  80u
#define SL_FIREWALL_HTTPS_PORT 443u
/* The inner wall's table in a container's network namespace. */
#define SL_FIREWALL_WALL_TABLE "sluice_wall"

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
    /* The proxy's transparent listener for redirected ports (`--transparent-port`), 1-65535. */
    unsigned redirect_port;
};

/* Writes the ruleset text for `cfg` (the `table inet ... { ... }` block, as nft reads it)
 * to `out`, which the caller initialised; text already there stays in front. Pure: no
 * netlink. Returns 0, SL_EINVAL when a field of `cfg` breaks its rule above (nothing is
 * written then), or the error of sl_buf_printf() (SL_ETOOBIG, SL_ENOMEM). */
SL_MUST_CHECK int sl_firewall_render(const struct sl_firewall_config *cfg, struct sl_buf *out);

/* Installs the table for `cfg`, replacing a table of that name if there is one, in one
 * nftables transaction (the old rules stay in force until the new ones are; the new table's
 * redirect_ports set is empty). Idempotent.
 * Returns 0; SL_EINVAL for a bad `cfg` (message in `err`, nothing sent to the kernel);
 * SL_ENOMEM; or SL_EIO when the kernel refused the batch (no rights, no nf_tables), with
 * nftables' own message in `err`. `err` (may be NULL when `cap` is 0) gets a one-line
 * message on failure. */
SL_MUST_CHECK int sl_firewall_install(const struct sl_firewall_config *cfg, char *err, size_t cap);

/* Replaces the elements of the redirect_ports set of the installed table `table` with the `n`
 * ports of `ports` (each 1-65535; duplicates are fine; n may be 0), in one transaction.
 * Returns 0, SL_EINVAL (a bad name or port: nothing sent), SL_ENOMEM or SL_EIO (the table is
 * not there, no rights) as sl_firewall_install(). */
SL_MUST_CHECK int sl_firewall_set_redirect_ports(const char *table, const uint16_t *ports, size_t n,
                                                 char *err, size_t cap);

/* Removes the table `table` (same name rule as the config's). A table that is not there is
 * success. Returns 0, SL_EINVAL, SL_ENOMEM or SL_EIO as sl_firewall_install(). */
SL_MUST_CHECK int sl_firewall_remove(const char *table, char *err, size_t cap);

/* Writes the table name of the network named `network` (NULL is "") to `out`, `cap` bytes:
 * "sluice_" + the name with every character outside [A-Za-z0-9_] replaced by '_', cut to
 * SL_FIREWALL_TABLE_CAP - 1 characters (or to fit a smaller `cap`; nothing when cap is 0).
 * With cap >= SL_FIREWALL_TABLE_CAP the result always passes the table name rule. Different
 * names can share a table ("a-b" and "a.b"). */
void sl_firewall_table_name(const char *network, char *out, size_t cap);

/* The inner wall of one container. Every pointer is borrowed for the call. */
struct sl_firewall_wall {
    /* The gateway's IPv4 address in dotted form. */
    const char *gateway;
    /* The TCP and UDP ports reachable on it, each 1-65535 (duplicates are fine; none: that
     * protocol reaches nothing there). */
    const uint16_t *tcp_ports;
    size_t n_tcp_ports;
    const uint16_t *udp_ports;
    size_t n_udp_ports;
};

/* Writes the inner wall's ruleset text (`table inet sluice_wall { ... }`) to `out` as
 * sl_firewall_render() does. Returns 0, SL_EINVAL (a bad gateway or port: nothing written),
 * SL_ETOOBIG or SL_ENOMEM. */
SL_MUST_CHECK int sl_firewall_wall_render(const struct sl_firewall_wall *w, struct sl_buf *out);

/* Installs the inner wall `w` in the network namespace the file `netns` stands for (a bind
 * mount of one, or /proc/PID/ns/net), replacing a wall there in one transaction. A thread of its
 * own enters the namespace and ends with the call: the caller's thread never changes
 * namespace. A file that is not a network namespace, and the calling process's own namespace,
 * are refused (SL_EINVAL) before anything is sent. Returns 0, SL_EINVAL, SL_ENOMEM, or SL_EIO
 * (the file cannot be opened or entered, the kernel refused the batch) with `err` set as
 * sl_firewall_install(). */
SL_MUST_CHECK int sl_firewall_wall_install(const char *netns, const struct sl_firewall_wall *w,
                                           char *err, size_t cap);

/* Installs the inner wall `w` in the calling thread's own network namespace, as
 * sl_firewall_wall_install() does in another one. Only for a process that lives in the
 * container's namespace for this alone: `sluice wall`, the helper container of a launcher whose
 * engine is on another host (control/sandbox/docker_wall.c); never the control plane. */
SL_MUST_CHECK int sl_firewall_wall_install_here(const struct sl_firewall_wall *w, char *err,
                                                size_t cap);

#endif
