/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/ca.c - `sluice ca init|show|mint`: create the interception CA, print its certificate,
 * print a leaf exactly as the proxy would mint it (to check a client's trust by hand).
 *
 * Options go through cmd/opts.h (no abbreviations, no global state).
 */
#include "certs/ca.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <openssl/pem.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/slice.h"
#include "certs/mint.h"
#include "cmd/cmd.h"
#include "cmd/opts.h"
#include "policy/host.h"

#define ERR_BYTES 512

static const char ca_usage[] =
        "usage: sluice ca COMMAND [ARGS]\n"
        "\n"
        "The interception CA that clients trust so that the proxy can inspect their TLS.\n"
        "\n"
        "commands:\n"
        "  init [--out DIR] [--force]   create a new CA: DIR/ca.pem (0644) and DIR/ca.key (0600)\n"
        "  show [--data DIR]            print the CA certificate (PEM) for clients to trust\n"
        "  mint HOST [--data DIR]       print a leaf for HOST as the proxy would mint it\n"
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

static const char mint_usage[] =
        "usage: sluice ca mint HOST [--data DIR]\n"
        "\n"
        "Mints a leaf certificate for HOST (a DNS name or an IP address) with the CA in DIR,\n"
        "exactly as the proxy does for an intercepted host, and prints it (PEM). Use it to check\n"
        "that a client trusts the CA:\n"
        "  openssl verify -CAfile DIR/ca.pem -verify_hostname HOST leaf.pem\n"
        "The leaf's private key is made afresh for this command and never printed.\n"
        "\n"
        "options:\n"
        "  --data DIR  the data directory (default: $SLUICE_DATA, or ./var)\n"
        "  --help      print this help\n";

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

/* The arguments of `ca show` and `ca mint`: --data DIR and up to `max_pos` positional ones,
 * or --help (its usage printed). False when the command is done, `*rc` its exit status. */
static bool parse_data_args(const char *cmd, const char *usage, int argc, char **argv,
                            const char **data, const char **pos, size_t max_pos, size_t *n_pos,
                            int *rc)
{
    const struct sl_opt specs[] = {
        { "--data", SL_OPT_VALUE, NULL, data, NULL, NULL, 0 },
    };

    if (!sl_opts_parse_or_usage(cmd, usage, argc, argv, specs, SL_ARRAY_LEN(specs), pos, max_pos,
                                n_pos, rc)) {
        *rc = *rc == SL_CMD_OK ? finish_output(cmd) : *rc;
        return false;
    }
    return true;
}

static int cmd_init(int argc, char **argv)
{
    const char *out = NULL;
    bool force = false;
    const struct sl_opt specs[] = {
        { "--out", SL_OPT_VALUE, NULL, &out, NULL, NULL, 0 },
        { "--force", SL_OPT_FLAG, &force, NULL, NULL, NULL, 0 },
    };
    const char *pos[1];
    size_t n_pos = 0;
    char err[ERR_BYTES] = "";
    struct sl_ca *ca = NULL;
    struct sl_buf subject;
    const char *dir;
    int rc;

    if (!sl_opts_parse_or_usage("ca init", init_usage, argc, argv, specs, SL_ARRAY_LEN(specs), pos,
                                0, &n_pos, &rc)) {
        return rc == SL_CMD_OK ? finish_output("ca init") : rc;
    }
    dir = sl_opts_data_dir(out);
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
    const char *pos[1];
    size_t n_pos = 0;
    char err[ERR_BYTES] = "";
    struct sl_ca *ca = NULL;
    struct sl_buf pem;
    int rc;

    if (!parse_data_args("ca show", show_usage, argc, argv, &data, pos, 0, &n_pos, &rc)) {
        return rc;
    }
    rc = sl_ca_load_dir(sl_opts_data_dir(data), false, &ca, err, sizeof(err));
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

/* Writes `cert` as PEM on standard output. */
static int print_cert(X509 *cert)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *data = NULL;
    long n;

    if (bio == NULL || PEM_write_bio_X509(bio, cert) != 1) {
        BIO_free(bio);
        return SL_ECRYPTO;
    }
    n = BIO_get_mem_data(bio, &data);
    if (n > 0) {
        (void)fwrite(data, 1, (size_t)n, stdout);
    }
    BIO_free(bio);
    return 0;
}

static int cmd_mint(int argc, char **argv)
{
    const char *data = NULL;
    const char *pos[1];
    size_t n_pos = 0;
    char err[ERR_BYTES] = "";
    struct sl_ca *ca = NULL;
    struct sl_minter *minter = NULL;
    X509 *leaf = NULL;
    struct sl_host host;
    const char *why = NULL;
    const char *name;
    int rc;

    if (!parse_data_args("ca mint", mint_usage, argc, argv, &data, pos, 1, &n_pos, &rc)) {
        return rc;
    }
    if (n_pos == 0) {
        sl_eprintf("ca mint: missing HOST (see sluice ca mint --help)");
        return SL_CMD_USAGE;
    }
    name = pos[0];
    if (sl_host_normalize(sl_slice_str(name), 0, &host, &why) < 0) {
        sl_eprintf("ca mint: bad host '%s': %s", name, why != NULL ? why : "invalid");
        return SL_CMD_USAGE;
    }
    if (host.kind == SL_HOST_IPV6) {
        /* The normal form brackets IPv6; a certificate names the bare address. */
        memmove(host.name, host.name + 1, host.len - 2);
        host.name[host.len - 2] = '\0';
    }
    rc = sl_ca_load_dir(sl_opts_data_dir(data), true, &ca, err, sizeof(err));
    if (rc == 0) {
        rc = sl_minter_create(ca, &minter, err, sizeof(err));
    }
    if (rc == 0) {
        rc = sl_minter_mint(minter, host.name, &leaf, err, sizeof(err));
    }
    if (rc == 0) {
        rc = print_cert(leaf);
        if (rc < 0) {
            (void)snprintf(err, sizeof(err), "cannot encode the certificate");
        }
    }
    X509_free(leaf);
    sl_minter_destroy(minter);
    sl_ca_destroy(ca);
    if (rc < 0) {
        sl_eprintf("ca mint: %s", err);
        return SL_CMD_FAIL;
    }
    return finish_output("ca mint");
}

static const struct sl_subcmd subs[] = {
    { "init", cmd_init },
    { "show", cmd_show },
    { "mint", cmd_mint },
};

int sl_cmd_ca(int argc, char **argv)
{
    const char *sub;

    if (argc < 2) {
        sl_eprintf("ca: missing command: init, show or mint (see sluice ca --help)");
        return SL_CMD_USAGE;
    }
    sub = argv[1];
    if (sl_opts_is_help(sub)) {
        (void)fputs(ca_usage, stdout);
        return finish_output("ca");
    }
    return sl_opts_run_subcmd("ca", subs, SL_ARRAY_LEN(subs), argc, argv);
}
