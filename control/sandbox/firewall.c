/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/firewall.c - the sandbox bridge's nftables table, through libnftables.
 *
 * Every string from the configuration ends up inside nft syntax, so each is checked against a
 * grammar with no quotes, spaces, semicolons or braces before any text is built; the gateway is
 * written back from its parsed form, not as given.
 */
#include "control/sandbox/firewall.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <nftables/libnftables.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"

#define TABLE_PREFIX "sluice_"
/* IFNAMSIZ less the terminator. */
#define BRIDGE_MAX 15
/* Bound on a rendered ruleset and the install batch: the text is a few hundred bytes. */
#define RULESET_MAX 4096

static bool is_word_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
           || ch == '_';
}

static int check_table(const char *table, char *err, size_t cap)
{
    size_t n;

    if (table == NULL || strncmp(table, TABLE_PREFIX, strlen(TABLE_PREFIX)) != 0) {
        sl_errf(err, cap, "firewall: the table name must start with \"" TABLE_PREFIX "\"");
        return SL_EINVAL;
    }
    n = strlen(table);
    if (n >= SL_FIREWALL_TABLE_CAP) {
        sl_errf(err, cap, "firewall: the table name is longer than %d characters",
                SL_FIREWALL_TABLE_CAP - 1);
        return SL_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_word_char(table[i])) {
            sl_errf(err, cap, "firewall: the table name may hold only A-Z, a-z, 0-9 and _");
            return SL_EINVAL;
        }
    }
    return 0;
}

static int check_bridge(const char *bridge, char *err, size_t cap)
{
    size_t n = bridge == NULL ? 0 : strlen(bridge);

    if (n == 0 || n > BRIDGE_MAX || strcmp(bridge, ".") == 0 || strcmp(bridge, "..") == 0) {
        sl_errf(err, cap, "firewall: the bridge name must be 1-%d characters (not . or ..)",
                BRIDGE_MAX);
        return SL_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_word_char(bridge[i]) && bridge[i] != '.' && bridge[i] != '-') {
            sl_errf(err, cap, "firewall: the bridge name may hold only A-Z, a-z, 0-9, _, . and -");
            return SL_EINVAL;
        }
    }
    return 0;
}

/* Checks `cfg` and writes the gateway's canonical dotted form to `gw`. */
static int check_config(const struct sl_firewall_config *cfg, char gw[INET_ADDRSTRLEN], char *err,
                        size_t cap)
{
    struct in_addr a;

    if (cfg == NULL) {
        sl_errf(err, cap, "firewall: no configuration");
        return SL_EINVAL;
    }
    SL_TRY(check_table(cfg->table, err, cap));
    SL_TRY(check_bridge(cfg->bridge, err, cap));
    if (cfg->gateway == NULL || inet_pton(AF_INET, cfg->gateway, &a) != 1
        || inet_ntop(AF_INET, &a, gw, INET_ADDRSTRLEN) == NULL) {
        sl_errf(err, cap, "firewall: the gateway must be an IPv4 address in dotted form");
        return SL_EINVAL;
    }
    if (cfg->proxy_port < 1 || cfg->proxy_port > 65535) {
        sl_errf(err, cap, "firewall: the proxy port must be 1-65535");
        return SL_EINVAL;
    }
    return 0;
}

static int render_checked(const struct sl_firewall_config *cfg, const char *gw, struct sl_buf *out)
{
    const char *br = cfg->bridge;

    /* Rejects, never drops: a dropped packet leaves a client waiting for its own timeout, while
     * a TCP reset fails a connect at once (ICMP admin-prohibited took about a second for TCP,
     * measured on Debian 12's kernel). */
    return sl_buf_printf(out,
                         "table inet %s {\n"
                         "\tchain input {\n"
                         "\t\ttype filter hook input priority filter - 10; policy accept;\n"
                         "\t\tiifname \"%s\" ct state established,related accept\n"
                         "\t\tiifname \"%s\" ip daddr %s tcp dport %u accept\n"
                         "\t\tiifname \"%s\" meta l4proto tcp reject with tcp reset\n"
                         "\t\tiifname \"%s\" reject with icmpx admin-prohibited\n"
                         "\t}\n"
                         "\tchain forward {\n"
                         "\t\ttype filter hook forward priority filter - 10; policy accept;\n"
                         "\t\tiifname \"%s\" meta l4proto tcp reject with tcp reset\n"
                         "\t\tiifname \"%s\" reject with icmpx admin-prohibited\n"
                         "\t\toifname \"%s\" ct state established,related accept\n"
                         "\t\toifname \"%s\" meta l4proto tcp reject with tcp reset\n"
                         "\t\toifname \"%s\" reject with icmpx admin-prohibited\n"
                         "\t}\n"
                         "}\n",
                         cfg->table, br, br, gw, cfg->proxy_port, br, br, br, br, br, br, br);
}

int sl_firewall_render(const struct sl_firewall_config *cfg, struct sl_buf *out)
{
    char gw[INET_ADDRSTRLEN];

    SL_TRY(check_config(cfg, gw, NULL, 0));
    return render_checked(cfg, gw, out);
}

/* The first line of nftables' error output, which names the failing command and the reason
 * ("Error: Could not process rule: Operation not permitted"). */
static void copy_nft_error(struct nft_ctx *nft, const char *what, char *err, size_t cap)
{
    const char *msg = nft_ctx_get_error_buffer(nft);
    size_t n = msg == NULL ? 0 : strcspn(msg, "\n");

    if (n == 0) {
        sl_errf(err, cap, "firewall: %s failed (nftables gave no reason)", what);
        return;
    }
    sl_errf(err, cap, "firewall: %s failed: %.*s", what, (int)(n > 400 ? 400 : n), msg);
}

/* Runs `cmds` as one nftables transaction. */
static int run_batch(const char *cmds, const char *what, char *err, size_t cap)
{
    struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
    int rc = 0;

    if (nft == NULL) {
        sl_errf(err, cap, "firewall: out of memory for the nftables context");
        return SL_ENOMEM;
    }
    if (nft_ctx_buffer_output(nft) != 0 || nft_ctx_buffer_error(nft) != 0) {
        sl_errf(err, cap, "firewall: cannot buffer nftables output");
        rc = SL_ENOMEM;
    } else if (nft_run_cmd_from_buffer(nft, cmds) != 0) {
        copy_nft_error(nft, what, err, cap);
        rc = SL_EIO;
    }
    nft_ctx_free(nft);
    return rc;
}

int sl_firewall_install(const struct sl_firewall_config *cfg, char *err, size_t cap)
{
    char gw[INET_ADDRSTRLEN];
    struct sl_buf b;
    int rc;

    SL_TRY(check_config(cfg, gw, err, cap));
    /* "add" makes the table exist so that "delete" cannot fail; the new table follows in the
     * same batch, so there is no moment without rules. */
    sl_buf_init(&b, RULESET_MAX);
    rc = sl_buf_printf(&b, "add table inet %s\ndelete table inet %s\n", cfg->table, cfg->table);
    if (rc == 0) {
        rc = render_checked(cfg, gw, &b);
    }
    if (rc < 0) {
        sl_errf(err, cap, "firewall: cannot build the ruleset: %s", sl_strerror(rc));
    } else {
        rc = run_batch(sl_buf_cstr(&b), "installing the table", err, cap);
    }
    sl_buf_finish(&b);
    return rc;
}

int sl_firewall_remove(const char *table, char *err, size_t cap)
{
    char cmds[2 * SL_FIREWALL_TABLE_CAP + 64];

    SL_TRY(check_table(table, err, cap));
    /* nft 1.0.6 has no "destroy": add-then-delete in one batch removes a table that may or
     * may not exist. */
    (void)snprintf(cmds, sizeof(cmds), "add table inet %s\ndelete table inet %s\n", table, table);
    return run_batch(cmds, "removing the table", err, cap);
}

void sl_firewall_table_name(const char *network, char *out, size_t cap)
{
    size_t n = 0;

    if (cap == 0) {
        return;
    }
    if (cap > SL_FIREWALL_TABLE_CAP) {
        cap = SL_FIREWALL_TABLE_CAP;
    }
    for (const char *p = TABLE_PREFIX; *p != '\0' && n + 1 < cap; p++) {
        out[n++] = *p;
    }
    for (const char *p = network == NULL ? "" : network; *p != '\0' && n + 1 < cap; p++) {
        if (is_word_char(*p)) {
            out[n++] = *p;
        } else {
            out[n++] = '_';
        }
    }
    out[n] = '\0';
}
