/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/pki.c - `sluice pki init|issue|revoke|list`: the control channel's CA, the certificates of
 * proxies, of the control plane and of container engines on other hosts, revocation
 * (certs/pki.h).
 *
 * Options go through cmd/opts.h (no abbreviations, no global state).
 */
#include "certs/pki.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/mem.h"
#include "cmd/cmd.h"
#include "cmd/opts.h"

#define ERR_BYTES 512

static const char pki_usage[] =
        "usage: sluice pki COMMAND DIR [ARGS]\n"
        "\n"
        "The control channel's certificates: the control plane and proxies on other machines\n"
        "authenticate each other with them (mutual TLS; `sluice proxy --admin-listen`,\n"
        "`sluice control --proxy-admin-url`).\n"
        "\n"
        "commands:\n"
        "  init DIR                          create the CA (DIR/ca.pem, DIR/ca.key) and an\n"
        "                                    empty CRL (DIR/crl.pem)\n"
        "  issue DIR proxy NAME --ip ADDR... --dns NAME...\n"
        "                                    a proxy's certificate (DIR/proxy-NAME.pem, .key)\n"
        "  issue DIR control NAME            the control plane's (DIR/control-NAME.pem, .key)\n"
        "  issue DIR engine NAME --ip ADDR... --dns NAME...\n"
        "                                    a Swarm node's Docker daemon's (DIR/engine-NAME.pem)\n"
        "  revoke DIR CERTFILE|SERIAL        add a certificate to DIR/crl.pem\n"
        "  list DIR                          every certificate issued: serial, kind, name,\n"
        "                                    not-after, revoked\n"
        "\n"
        "`sluice pki COMMAND --help` describes a command.\n";

static const char init_usage[] =
        "usage: sluice pki init DIR\n"
        "\n"
        "Creates the control channel's CA in DIR (created 0700 when missing): DIR/ca.pem (the\n"
        "certificate both sides trust, 0644), DIR/ca.key (its private key, 0600; keep it on\n"
        "the machine that issues certificates), DIR/crl.pem (the revocation list, empty) and\n"
        "DIR/issued/ (a copy of every certificate issued). Refuses a DIR that holds a CA.\n"
        "\n"
        "options:\n"
        "  --help      print this help\n";

static const char issue_usage[] =
        "usage: sluice pki issue DIR proxy NAME (--ip ADDR | --dns NAME)... [--days N] [--force]\n"
        "       sluice pki issue DIR control NAME [--days N] [--force]\n"
        "       sluice pki issue DIR engine NAME (--ip ADDR | --dns NAME)... [--days N] [--force]\n"
        "\n"
        "Issues a certificate with the CA in DIR and writes DIR/KIND-NAME.pem (0644) and\n"
        "DIR/KIND-NAME.key (0600). A proxy's certificate (serverAuth) names the addresses and\n"
        "host names the control plane dials (the host of its --proxy-admin-url); the control\n"
        "plane's (clientAuth) is what it shows the proxies and the engines. An engine's\n"
        "(serverAuth) is a Swarm node's Docker daemon's (dockerd --tlsverify --tlscert, with\n"
        "DIR/ca.pem as --tlscacert: it then requires the control plane's certificate); it names\n"
        "the node's address (sluice control --swarm-*). Docker reads no CRL: revoking an\n"
        "engine's or the control plane's certificate does not reach the daemons.\n"
        "\n"
        "options:\n"
        "  --ip ADDR   an IPv4 or IPv6 address of the proxy or engine (repeatable)\n"
        "  --dns NAME  a DNS name of the proxy or engine (repeatable)\n"
        "  --days N    validity in days (default 365, at most 3650)\n"
        "  --force     replace existing files of that kind and name (the old certificate stays\n"
        "              valid until revoked)\n"
        "  --help      print this help\n";

static const char revoke_usage[] =
        "usage: sluice pki revoke DIR CERTFILE|SERIAL\n"
        "\n"
        "Revokes a certificate issued from DIR, named by its file or its serial (as `pki list`\n"
        "prints it), and signs DIR/crl.pem again. Copy crl.pem to every machine that checks it\n"
        "(--admin-crl, --proxy-admin-crl): a running proxy reads it again when it changes.\n"
        "\n"
        "options:\n"
        "  --help      print this help\n";

static const char list_usage[] =
        "usage: sluice pki list DIR\n"
        "\n"
        "Prints every certificate issued from DIR, one a line: serial, kind, name, not-after\n"
        "(UTC) and whether it is revoked.\n"
        "\n"
        "options:\n"
        "  --help      print this help\n";

static int finish_output(const char *cmd)
{
    if (fflush(stdout) == EOF || ferror(stdout)) {
        sl_eprintf("%s: cannot write to standard output", cmd);
        return SL_CMD_FAIL;
    }
    return SL_CMD_OK;
}

/* Parses a command whose only options are --help; `want` positional arguments. */
static bool parse_plain(const char *cmd, const char *usage, int argc, char **argv, const char **pos,
                        size_t want, int *rc)
{
    size_t n_pos = 0;

    if (!sl_opts_parse_or_usage(cmd, usage, argc, argv, NULL, 0, pos, want, &n_pos, rc)) {
        *rc = *rc == SL_CMD_OK ? finish_output(cmd) : *rc;
        return false;
    }
    if (n_pos != want) {
        sl_eprintf("%s: needs %s (see sluice %s --help)", cmd,
                   want == 1 ? "DIR" : "DIR and CERTFILE or SERIAL", cmd);
        *rc = SL_CMD_USAGE;
        return false;
    }
    return true;
}

static int cmd_init(int argc, char **argv)
{
    const char *pos[1];
    char err[ERR_BYTES] = "";
    int rc;

    if (!parse_plain("pki init", init_usage, argc, argv, pos, 1, &rc)) {
        return rc;
    }
    if (sl_pki_init(pos[0], err, sizeof(err)) < 0) {
        sl_eprintf("pki init: %s", err);
        return SL_CMD_FAIL;
    }
    printf("created the control channel CA in %s: ca.pem (trusted by both sides), ca.key (keep "
           "it here), crl.pem (the revocation list)\n",
           pos[0]);
    return finish_output("pki init");
}

static int cmd_issue(int argc, char **argv)
{
    const char *ips[SL_PKI_SAN_MAX + 1];
    const char *dns[SL_PKI_SAN_MAX + 1];
    size_t n_ips = 0;
    size_t n_dns = 0;
    const char *days = NULL;
    bool force = false;
    const struct sl_opt specs[] = {
        { "--ip", SL_OPT_LIST, NULL, NULL, ips, &n_ips, SL_PKI_SAN_MAX },
        { "--dns", SL_OPT_LIST, NULL, NULL, dns, &n_dns, SL_PKI_SAN_MAX },
        { "--days", SL_OPT_VALUE, NULL, &days, NULL, NULL, 0 },
        { "--force", SL_OPT_FLAG, &force, NULL, NULL, NULL, 0 },
    };
    const char *pos[3];
    size_t n_pos = 0;
    char err[ERR_BYTES] = "";
    char cert[4096];
    char serial[SL_PKI_SERIAL_HEX_MAX + 1];
    struct sl_pki_request req;
    int rc;

    if (!sl_opts_parse_or_usage("pki issue", issue_usage, argc, argv, specs, SL_ARRAY_LEN(specs),
                                pos, 3, &n_pos, &rc)) {
        return rc == SL_CMD_OK ? finish_output("pki issue") : rc;
    }
    if (n_pos != 3) {
        sl_eprintf("pki issue: needs DIR, proxy, control or engine, and NAME (see sluice pki issue "
                   "--help)");
        return SL_CMD_USAGE;
    }
    memset(&req, 0, sizeof(req));
    if (strcmp(pos[1], "proxy") == 0) {
        req.kind = SL_PKI_PROXY;
    } else if (strcmp(pos[1], "control") == 0) {
        req.kind = SL_PKI_CONTROL;
    } else if (strcmp(pos[1], "engine") == 0) {
        req.kind = SL_PKI_ENGINE;
    } else {
        sl_eprintf("pki issue: the kind is proxy, control or engine, not '%s'", pos[1]);
        return SL_CMD_USAGE;
    }
    if (days != NULL
        && sl_opts_uint("pki issue", "--days", days, 1, SL_PKI_DAYS_MAX, &req.days) != 0) {
        return SL_CMD_USAGE;
    }
    req.name = pos[2];
    req.ips = ips;
    req.n_ips = n_ips;
    req.dns = dns;
    req.n_dns = n_dns;
    req.force = force;
    rc = sl_pki_issue(pos[0], &req, cert, sizeof(cert), serial, err, sizeof(err));
    if (rc < 0) {
        sl_eprintf("pki issue: %s%s", err, rc == SL_EEXIST ? " (use --force to replace it)" : "");
        return rc == SL_EINVAL ? SL_CMD_USAGE : SL_CMD_FAIL;
    }
    printf("issued %s certificate %s serial %s: %s (key next to it, mode 0600)\n", pos[1], pos[2],
           serial, cert);
    return finish_output("pki issue");
}

static int cmd_revoke(int argc, char **argv)
{
    const char *pos[2];
    char err[ERR_BYTES] = "";
    char serial[SL_PKI_SERIAL_HEX_MAX + 1];
    int rc;

    if (!parse_plain("pki revoke", revoke_usage, argc, argv, pos, 2, &rc)) {
        return rc;
    }
    if (sl_pki_revoke(pos[0], pos[1], serial, err, sizeof(err)) < 0) {
        sl_eprintf("pki revoke: %s", err);
        return SL_CMD_FAIL;
    }
    printf("revoked serial %s; %s/%s is signed again: copy it to every machine that checks it\n",
           serial, pos[0], SL_PKI_CRL_FILE);
    return finish_output("pki revoke");
}

static int cmd_list(int argc, char **argv)
{
    const char *pos[1];
    char err[ERR_BYTES] = "";
    struct sl_pki_entry *v = NULL;
    size_t n = 0;
    int rc;

    if (!parse_plain("pki list", list_usage, argc, argv, pos, 1, &rc)) {
        return rc;
    }
    if (sl_pki_list(pos[0], &v, &n, err, sizeof(err)) < 0) {
        sl_eprintf("pki list: %s", err);
        return SL_CMD_FAIL;
    }
    printf("%-32s  %-7s  %-24s  %-20s  %s\n", "SERIAL", "KIND", "NAME", "NOT-AFTER", "REVOKED");
    for (size_t i = 0; i < n; i++) {
        char when[32] = "?";
        struct tm tm;

        if (gmtime_r(&v[i].not_after, &tm) != NULL) {
            (void)strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        }
        printf("%-32s  %-7s  %-24s  %-20s  %s\n", v[i].serial, v[i].kind, v[i].name, when,
               v[i].revoked ? "yes" : "no");
    }
    sl_free(v);
    return finish_output("pki list");
}

static const struct sl_subcmd subs[] = {
    { "init", cmd_init },
    { "issue", cmd_issue },
    { "revoke", cmd_revoke },
    { "list", cmd_list },
};

int sl_cmd_pki(int argc, char **argv)
{
    const char *sub;

    if (argc < 2) {
        sl_eprintf("pki: missing command: init, issue, revoke or list (see sluice pki --help)");
        return SL_CMD_USAGE;
    }
    sub = argv[1];
    if (sl_opts_is_help(sub)) {
        (void)fputs(pki_usage, stdout);
        return finish_output("pki");
    }
    return sl_opts_run_subcmd("pki", subs, SL_ARRAY_LEN(subs), argc, argv);
}
