/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/user.c - `sluice user add NAME [--admin] [--data DIR]` (SPEC.md §1): creates a user in
 * sluice.db and prints its API token once, alone on one line, so scripts can capture it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <sodium.h>

#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/opts.h"
#include "control/store/model.h"
#include "control/store/secrets.h"
#include "control/store/store.h"

static const char usage[] =
        "usage: sluice user add NAME [--admin] [--data DIR]\n"
        "\n"
        "Creates a control plane user in DIR/sluice.db (created when missing) and prints its\n"
        "API token once, alone on one line. Only the token's hash is stored.\n"
        "\n"
        "flags:\n"
        "  --admin      the user may manage global environments and static clients\n"
        "  --data DIR   data directory (default: $SLUICE_DATA, or ./var)\n";

int sl_cmd_user_create(struct sl_store *st, const char *name, bool admin, char *token)
{
    char token_name[] = "default";
    struct sl_store_token t;
    struct sl_user u;
    uint8_t hash[SL_TOKEN_HASH_BYTES];
    int rc;

    memset(&u, 0, sizeof(u));
    memset(&t, 0, sizeof(t));
    rc = sl_token_new(token);
    if (rc == 0) {
        rc = sl_token_hash(token, hash);
    }
    if (rc == 0) {
        rc = sl_store_user_create(st, name, admin, NULL, &u);
    }
    if (rc == 0) {
        (void)snprintf(t.user_id, sizeof(t.user_id), "%s", u.id);
        t.kind = SL_TOKEN_KIND_API;
        t.scope = admin ? SL_TOKEN_SCOPE_ADMIN : SL_TOKEN_SCOPE_WRITE;
        t.name = token_name;
        rc = sl_store_token_add(st, hash, &t);
    }
    if (rc < 0) {
        sodium_memzero(token, SL_TOKEN_SIZE);
    }
    sl_user_finish(&u);
    return rc;
}

/* Creates the user and its token; prints the token. */
static int add_user(const char *dir, const char *name, bool admin)
{
    struct sl_store *st = NULL;
    char path[4096];
    char err[512] = "";
    char token[SL_TOKEN_SIZE];
    int rc;

    if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
        sl_eprintf("user: cannot create the data directory %s: %s", dir, strerror(errno));
        return SL_CMD_FAIL;
    }
    if (snprintf(path, sizeof(path), "%s/sluice.db", dir) >= (int)sizeof(path)) {
        sl_eprintf("user: the data directory's path is too long");
        return SL_CMD_FAIL;
    }
    rc = sl_store_open(path, &st, err, sizeof(err));
    if (rc < 0) {
        sl_eprintf("user: %s", err);
        return SL_CMD_FAIL;
    }
    rc = sl_cmd_user_create(st, name, admin, token);
    if (rc == 0) {
        printf("%s\n", token);
        rc = fflush(stdout) == 0 ? 0 : SL_EIO;
    } else if (rc == SL_EEXIST) {
        sl_eprintf("user: a user named '%s' exists already", name);
    } else {
        sl_eprintf("user: cannot create the user: %s", sl_strerror(rc));
    }
    sodium_memzero(token, sizeof(token));
    sl_store_close(st);
    return rc == 0 ? SL_CMD_OK : SL_CMD_FAIL;
}

int sl_cmd_user(int argc, char **argv)
{
    const char *pos[2];
    size_t n_pos = 0;
    const char *data = NULL;
    bool admin = false;
    bool help = false;
    int rc;
    const struct sl_opt opts[] = {
        { "--admin", SL_OPT_FLAG, &admin, NULL, NULL, NULL, 0 },
        { "--data", SL_OPT_VALUE, NULL, &data, NULL, NULL, 0 },
    };

    rc = sl_opts_parse("user", argc, argv, opts, SL_ARRAY_LEN(opts), pos, SL_ARRAY_LEN(pos), &n_pos,
                       &help);
    if (rc != SL_CMD_OK) {
        return rc;
    }
    if (help) {
        (void)fputs(usage, stdout);
        return SL_CMD_OK;
    }
    if (n_pos == 0 || strcmp(pos[0], "add") != 0) {
        sl_eprintf("user: expected `user add NAME` (see sluice user --help)");
        return SL_CMD_USAGE;
    }
    if (n_pos != 2 || pos[1][0] == '\0') {
        sl_eprintf("user add: expected one NAME");
        return SL_CMD_USAGE;
    }
    return add_user(sl_opts_data_dir(data), pos[1], admin);
}
