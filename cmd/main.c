/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/main.c - `sluice`: one binary, one subcommand per role (docs/reference/cli.md §1).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/opts.h"

static const char usage[] =
        "usage: sluice [--help] [--version] COMMAND [ARGS]\n"
        "\n"
        "The egress gateway for sandbox containers.\n"
        "\n"
        "commands:\n"
        "  ca init [--out DIR] [--force]     create the interception CA (ca.pem, ca.key)\n"
        "  ca show [--data DIR]              print the CA certificate for clients to trust\n"
        "  ca mint HOST [--data DIR]         print a leaf for HOST as the proxy mints it\n"
        "  pki init|issue|revoke|list DIR ...\n"
        "                                    the control channel's certificates (mutual TLS\n"
        "                                    between the control plane and remote proxies)\n"
        "  policy check FILE                 validate a policy snapshot file\n"
        "  policy explain FILE --client ID-OR-IP --url URL [--method M]\n"
        "                                    print the decision the proxy would take\n"
        "  proxy [flags]                     the data plane (sluice proxy --help)\n"
        "  control [flags]                   the control plane (sluice control --help)\n"
        "  user add NAME [--admin] [--email E] [--data DIR]\n"
        "                                    create a control plane user; prints its token\n"
        "  user disable|enable NAME, user list\n"
        "                                    switch a user off or on; list the users\n"
        "  config check FILE [--for CMD]     check a configuration file (--config)\n"
        "  backup --data DIR --out FILE      a consistent copy of the data directory, live\n"
        "  restore --from FILE --data DIR    a backup into an empty data directory\n"
        "  up [flags] [-- proxy flags]       the single-machine install: proxy + control plane\n"
        "                                    + container network (sluice up --help)\n"
        "  wall --gateway ADDR [--tcp P,..] [--udp P,..]\n"
        "                                    a sandbox's inner wall in this network namespace\n"
        "                                    (the helper of a remote engine; sluice wall --help)\n"
        "\n"
        "`sluice COMMAND --help` describes a command.\n";

static const struct sl_subcmd commands[] = {
    { "ca", sl_cmd_ca },           { "policy", sl_cmd_policy }, { "proxy", sl_cmd_proxy },
    { "control", sl_cmd_control }, { "user", sl_cmd_user },     { "up", sl_cmd_up },
    { "config", sl_cmd_config },   { "backup", sl_cmd_backup }, { "restore", sl_cmd_restore },
    { "wall", sl_cmd_wall },       { "pki", sl_cmd_pki },
};

int main(int argc, char **argv)
{
    const char *cmd;

    /* A peer that closes while we write must cost a write error, not the process. */
    (void)signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        fputs(usage, stdout);
        return SL_CMD_USAGE;
    }
    cmd = argv[1];
    if (sl_opts_is_help(cmd)) {
        fputs(usage, stdout);
        return SL_CMD_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("sluice %s\n", SLUICE_VERSION);
        return SL_CMD_OK;
    }
    return sl_opts_run_subcmd("", commands, SL_ARRAY_LEN(commands), argc, argv);
}
