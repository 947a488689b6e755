/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/wall.c - `sluice wall --gateway ADDR [--tcp PORTS] [--udp PORTS]`: installs a sandbox's
 * inner wall (control/sandbox/firewall.h, table inet sluice_wall) in the network namespace the
 * command runs in, replacing one there, and exits.
 *
 * Not for people: it is what the helper container runs that a launcher whose engine is on
 * another host starts in a sandbox's network namespace (NetworkMode container:ID, CAP_NET_ADMIN
 * alone; control/sandbox/docker_wall.c), since the control plane cannot enter that namespace
 * itself. Run anywhere else it walls in whatever namespace it runs in.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/opts.h"
#include "control/sandbox/firewall.h"

/* Every port there is, of one protocol. */
#define PORTS_MAX 65535u

static const char usage[] =
        "usage: sluice wall --gateway ADDR [--tcp PORTS] [--udp PORTS]\n"
        "\n"
        "Installs a sandbox's inner wall (nftables table inet sluice_wall) in the network\n"
        "namespace this command runs in, replacing one there: output only to ADDR on the TCP\n"
        "and UDP ports listed (comma-separated, 1-65535), to the loopback and as replies; input\n"
        "only on the loopback and as replies. Needs CAP_NET_ADMIN. Run by the helper container\n"
        "of a launcher whose engine is on another host, inside the sandbox's namespace.\n"
        "\n"
        "options:\n"
        "  --gateway ADDR  the IPv4 address the ports are on\n"
        "  --tcp PORTS     TCP ports reachable on it\n"
        "  --udp PORTS     UDP ports reachable on it\n"
        "  --help          print this help\n";

/* Reads "P,P,..." into `out` (n ports). Returns 0 or 2 after a message. */
static int parse_ports(const char *flag, const char *text, uint16_t *out, size_t *n)
{
    const char *p = text;

    *n = 0;
    if (text == NULL) {
        return SL_CMD_OK;
    }
    for (;;) {
        char *end = NULL;
        unsigned long v;

        if (*p < '0' || *p > '9' || *n == PORTS_MAX) {
            break;
        }
        v = strtoul(p, &end, 10);
        if (v == 0 || v > 65535 || (*end != ',' && *end != '\0')) {
            break;
        }
        out[(*n)++] = (uint16_t)v;
        if (*end == '\0') {
            return SL_CMD_OK;
        }
        p = end + 1;
    }
    sl_eprintf("wall: %s: expected ports 1-65535 separated by commas", flag);
    return SL_CMD_USAGE;
}

int sl_cmd_wall(int argc, char **argv)
{
    static uint16_t tcp[PORTS_MAX];
    static uint16_t udp[PORTS_MAX];
    const char *gateway = NULL;
    const char *tcp_text = NULL;
    const char *udp_text = NULL;
    const struct sl_opt opts[] = {
        { .name = "--gateway", .kind = SL_OPT_VALUE, .value = &gateway },
        { .name = "--tcp", .kind = SL_OPT_VALUE, .value = &tcp_text },
        { .name = "--udp", .kind = SL_OPT_VALUE, .value = &udp_text },
    };
    struct sl_firewall_wall w = { 0 };
    char err[512];
    size_t n_pos = 0;
    int rc = 0;

    if (!sl_opts_parse_or_usage("wall", usage, argc, argv, opts, SL_ARRAY_LEN(opts), NULL, 0,
                                &n_pos, &rc)) {
        return rc;
    }
    if (gateway == NULL) {
        sl_eprintf("wall: --gateway is required");
        return SL_CMD_USAGE;
    }
    if (parse_ports("--tcp", tcp_text, tcp, &w.n_tcp_ports) != SL_CMD_OK
        || parse_ports("--udp", udp_text, udp, &w.n_udp_ports) != SL_CMD_OK) {
        return SL_CMD_USAGE;
    }
    w.gateway = gateway;
    w.tcp_ports = tcp;
    w.udp_ports = udp;
    rc = sl_firewall_wall_install_here(&w, err, sizeof(err));
    if (rc < 0) {
        sl_eprintf("wall: %s", err);
        return rc == SL_EINVAL ? SL_CMD_USAGE : SL_CMD_FAIL;
    }
    return SL_CMD_OK;
}
