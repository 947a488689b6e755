/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/ca.c - `sluice ca init|show`: create the interception CA, print its certificate.
 *
 * Options are parsed by hand rather than with getopt_long(): GNU getopt accepts abbreviations
 * (`--fo` for `--force`), permutes argv and keeps global state between calls, none of which a
 * two-option command wants.
 */
#include "certs/ca.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/log.h"
#include "cmd/cmd.h"

#define DEFAULT_DATA_DIR "./var"
#define ERR_BYTES        512

static const char ca_usage[] =
        "usage: sluice ca COMMAND [ARGS]\n"
        "\n"
        "The interception CA that clients trust so that the proxy can inspect their TLS.\n"
        "\n"
        "commands:\n"
        "  init [--out DIR] [--force]   create a new CA: DIR/ca.pem (0644) and DIR/ca.key (0600)\n"
        "  show [--data DIR]            print the CA certificate (PEM) for clients to trust\n"
        "\n"
        "DIR defaults to $SLUICE_DATA, or ./var when it is unset.\n"
        "`sluice ca COMMAND --help` describes a command.\n";

static const char init_usage[] =
        "usage: sluice ca init [--out DIR] [--force]\n"
        "\n"
        "Creates a new interception CA (ECDSA P-256, valid ten years) and writes its certificate\n"
        "to DIR/ca.pem (mode 0644) and its private key to DIR/ca.key (mode 0600). DIR is created\n"
        "(mode 0700) when missing.\n"
        "\n"
        "options:\n"
        "  --out DIR   where to write (default: $SLUICE_DATA, or ./var)\n"
        "  --force     replace an existing CA; clients that trusted the old one must be given\n"
        "              the new certificate\n"
        "  --help      print this help\n";

static const char show_usage[] =
        "usage: sluice ca show [--data DIR]\n"
        "\n"
        "Checks the CA certificate DIR/ca.pem and prints it (PEM) on standard output, for\n"
        "containers and clients to trust. The private key is not read.\n"
        "\n"
        "options:\n"
        "  --data DIR  the data directory (default: $SLUICE_DATA, or ./var)\n"
        "  --help      print this help\n";

/* One option of a subcommand: a flag (`flag` set) or an option with a value (`value` set). */
struct option_spec {
    /* "--name", as typed. */
    const char *name;
    /* Set to true when the flag is given; NULL for an option with a value. */
    bool *flag;
    /* Receives the value, borrowed from argv; NULL for a flag. */
    const char **value;
};

/* Parses `argv[1]...` against `specs`. Returns 0 and sets `*help` when --help or -h came first
 * among the problems; otherwise prints one line naming the problem and returns SL_CMD_USAGE. */
static int parse_options(const char *cmd, int argc, char **argv, const struct option_spec *specs,
                         size_t nspecs, bool *help)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const struct option_spec *spec = NULL;
        const char *eq;
        size_t len;

        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            *help = true;
            return 0;
        }
        if (arg[0] != '-') {
            sl_eprintf("%s: unexpected argument '%s' (see sluice %s --help)", cmd, arg, cmd);
            return SL_CMD_USAGE;
        }
        eq = strchr(arg, '=');
        len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
        for (size_t k = 0; k < nspecs; k++) {
            if (strlen(specs[k].name) == len && memcmp(specs[k].name, arg, len) == 0) {
                spec = &specs[k];
            }
        }
        if (spec == NULL) {
            sl_eprintf("%s: unknown option '%.*s' (see sluice %s --help)", cmd, (int)len, arg, cmd);
            return SL_CMD_USAGE;
        }
        if (spec->flag != NULL) {
            if (eq != NULL) {
                sl_eprintf("%s: option '%s' takes no value", cmd, spec->name);
                return SL_CMD_USAGE;
            }
            *spec->flag = true;
            continue;
        }
        if (eq != NULL) {
            *spec->value = eq + 1;
        } else if (i + 1 < argc && argv[i + 1][0] != '-') {
            *spec->value = argv[++i];
        } else {
            *spec->value = "";
        }
        if ((*spec->value)[0] == '\0') {
            sl_eprintf("%s: option '%s' needs a value", cmd, spec->name);
            return SL_CMD_USAGE;
        }
    }
    return 0;
}

/* --out/--data, else $SLUICE_DATA, else ./var (SPEC.md §1). */
static const char *data_dir(const char *flag)
{
    const char *env;

    if (flag != NULL) {
        return flag;
    }
    env = getenv("SLUICE_DATA");
    return env != NULL && env[0] != '\0' ? env : DEFAULT_DATA_DIR;
}

static const char *dir_sep(const char *dir)
{
    size_t n = strlen(dir);

    return n > 0 && dir[n - 1] == '/' ? "" : "/";
}

static int finish_output(const char *cmd)
{
    if (fflush(stdout) == EOF || ferror(stdout)) {
        sl_eprintf("%s: cannot write to standard output", cmd);
        return SL_CMD_FAIL;
    }
    return SL_CMD_OK;
}

static int cmd_init(int argc, char **argv)
{
    const char *out = NULL;
    bool force = false;
    bool help = false;
    const struct option_spec specs[] = {
        { "--out", NULL, &out },
        { "--force", &force, NULL },
    };
    char err[ERR_BYTES] = "";
    struct sl_ca *ca = NULL;
    struct sl_buf subject;
    const char *dir;
    int rc;

    rc = parse_options("ca init", argc, argv, specs, SL_ARRAY_LEN(specs), &help);
    if (rc != 0) {
        return rc;
    }
    if (help) {
        (void)fputs(init_usage, stdout);
        return finish_output("ca init");
    }
    dir = data_dir(out);
    rc = sl_ca_create(&ca, err, sizeof(err));
    if (rc < 0) {
        sl_eprintf("ca init: %s", err);
        return SL_CMD_FAIL;
    }
    rc = sl_ca_write(ca, dir, force, err, sizeof(err));
    if (rc < 0) {
        sl_eprintf("ca init: %s%s", err, rc == SL_EEXIST ? " (use --force to replace the CA)" : "");
        sl_ca_destroy(ca);
        return SL_CMD_FAIL;
    }
    sl_buf_init(&subject, 4096);
    if (sl_ca_subject(ca, &subject) < 0) {
        sl_buf_reset(&subject);
    }
    printf("wrote %s%s%s (CA certificate, mode 0644; clients trust this file)\n", dir, dir_sep(dir),
           SL_CA_CERT_FILE);
    printf("wrote %s%s%s (CA private key, mode 0600; keep it secret)\n", dir, dir_sep(dir),
           SL_CA_KEY_FILE);
    printf("subject: %s\n", sl_buf_cstr(&subject));
    sl_buf_finish(&subject);
    sl_ca_destroy(ca);
    return finish_output("ca init");
}

static int cmd_show(int argc, char **argv)
{
    const char *data = NULL;
    bool help = false;
    const struct option_spec specs[] = {
        { "--data", NULL, &data },
    };
    char err[ERR_BYTES] = "";
    struct sl_ca *ca = NULL;
    struct sl_buf pem;
    int rc;

    rc = parse_options("ca show", argc, argv, specs, SL_ARRAY_LEN(specs), &help);
    if (rc != 0) {
        return rc;
    }
    if (help) {
        (void)fputs(show_usage, stdout);
        return finish_output("ca show");
    }
    rc = sl_ca_load_dir(data_dir(data), false, &ca, err, sizeof(err));
    if (rc < 0) {
        sl_eprintf("ca show: %s", err);
        return SL_CMD_FAIL;
    }
    sl_buf_init(&pem, SL_CA_FILE_MAX_BYTES);
    rc = sl_ca_cert_pem(ca, &pem);
    sl_ca_destroy(ca);
    if (rc < 0) {
        sl_eprintf("ca show: cannot encode the certificate: %s", sl_strerror(rc));
        sl_buf_finish(&pem);
        return SL_CMD_FAIL;
    }
    (void)fputs(sl_buf_cstr(&pem), stdout);
    sl_buf_finish(&pem);
    return finish_output("ca show");
}

int sl_cmd_ca(int argc, char **argv)
{
    const char *sub;

    if (argc < 2) {
        sl_eprintf("ca: missing command: init or show (see sluice ca --help)");
        return SL_CMD_USAGE;
    }
    sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        (void)fputs(ca_usage, stdout);
        return finish_output("ca");
    }
    if (strcmp(sub, "init") == 0) {
        return cmd_init(argc - 1, argv + 1);
    }
    if (strcmp(sub, "show") == 0) {
        return cmd_show(argc - 1, argv + 1);
    }
    if (sub[0] == '-') {
        sl_eprintf("ca: unknown option '%s' (see sluice ca --help)", sub);
    } else {
        sl_eprintf("ca: unknown command '%s' (see sluice ca --help)", sub);
    }
    return SL_CMD_USAGE;
}
