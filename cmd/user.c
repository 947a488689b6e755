/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/user.c - `sluice user add|disable|enable|list` (docs/reference/cli.md §1.7): the users of
 * sluice.db from the command line. `add` creates a user and prints its API token once, alone on
 * one line, so scripts can capture it; `disable` and `enable` switch a user off and on; `list`
 * prints every user.
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
        "usage: sluice user add NAME [--admin] [--email ADDRESS] [--data DIR]\n"
        "       sluice user disable NAME [--data DIR]\n"
        "       sluice user enable NAME [--data DIR]\n"
        "       sluice user list [--data DIR]\n"
        "\n"
        "The control plane's users in DIR/sluice.db (created when missing).\n"
        "  add      creates a user and prints its API token once, alone on one line (scope\n"
        "           admin for an admin, write otherwise). Only the token's hash is stored.\n"
        "  disable  refuses the user's tokens from now on (401 account disabled); their\n"
        "           sandboxes lose the proxy at the control plane's next snapshot\n"
        "  enable   lets a disabled user in again\n"
        "  list     one line per user: name, admin or user, enabled or disabled, email\n"
        "\n"
        "flags:\n"
        "  --admin          the user may manage global environments, static clients, users\n"
        "                   and repositories\n"
        "  --email ADDRESS  the address of the user's commits in sandboxes\n"
        "  --data DIR       data directory (default: $SLUICE_DATA, or ./var)\n";

int sl_cmd_user_create(struct sl_store *st, const char *name, bool admin, const char *email,
                       char *token, char *taken, size_t taken_len)
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
        rc = sl_store_user_create(st, name, admin, email, &u);
    }
    if (rc == SL_EEXIST && u.name != NULL && taken != NULL && taken_len > 0) {
        /* The name that is taken, maybe in another case (`Alice` by `alice`). */
        (void)snprintf(taken, taken_len, "%s", u.name);
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

/* Opens DIR/sluice.db (and DIR, when `create`), or says why not. */
static int open_db(const char *dir, bool create, struct sl_store **st)
{
    char path[4096];
    char err[512] = "";

    if (create && mkdir(dir, 0700) == -1 && errno != EEXIST) {
        sl_eprintf("user: cannot create the data directory %s: %s", dir, strerror(errno));
        return SL_EIO;
    }
    if (snprintf(path, sizeof(path), "%s/sluice.db", dir) >= (int)sizeof(path)) {
        sl_eprintf("user: the data directory's path is too long");
        return SL_EINVAL;
    }
    if (sl_store_open(path, st, err, sizeof(err)) < 0) {
        sl_eprintf("user: %s", err);
        return SL_EIO;
    }
    return 0;
}

/* Creates the user and its token; prints the token. */
static int add_user(const char *dir, const char *name, bool admin, const char *email)
{
    struct sl_store *st = NULL;
    char token[SL_TOKEN_SIZE];
    char taken[128] = "";
    int rc;

    if (open_db(dir, true, &st) < 0) {
        return SL_CMD_FAIL;
    }
    rc = sl_cmd_user_create(st, name, admin, email, token, taken, sizeof(taken));
    if (rc == 0) {
        printf("%s\n", token);
        rc = fflush(stdout) == 0 ? 0 : SL_EIO;
    } else if (rc == SL_EEXIST) {
        sl_eprintf("user: a user named '%s' exists already", taken[0] != '\0' ? taken : name);
    } else {
        sl_eprintf("user: cannot create the user: %s", sl_strerror(rc));
    }
    sodium_memzero(token, sizeof(token));
    sl_store_close(st);
    return rc == 0 ? SL_CMD_OK : SL_CMD_FAIL;
}

/* `disable` or `enable`. */
static int switch_user(const char *dir, const char *name, bool disable)
{
    struct sl_store_user_change ch = { .set_disabled = true, .disabled = disable };
    struct sl_store *st = NULL;
    int rc;

    if (open_db(dir, false, &st) < 0) {
        return SL_CMD_FAIL;
    }
    rc = sl_store_user_update(st, name, &ch, NULL);
    if (rc == 0) {
        printf("user %s is %s\n", name, disable ? "disabled" : "enabled");
        rc = fflush(stdout) == 0 ? 0 : SL_EIO;
    } else if (rc == SL_ENOTFOUND) {
        sl_eprintf("user: no user named '%s'", name);
    } else if (rc == SL_EINVAL) {
        sl_eprintf("user: '%s' is the last enabled admin; make another admin first", name);
    } else {
        sl_eprintf("user: cannot change the user: %s", sl_strerror(rc));
    }
    sl_store_close(st);
    return rc == 0 ? SL_CMD_OK : SL_CMD_FAIL;
}

static int list_users(const char *dir)
{
    struct sl_store *st = NULL;
    struct sl_user *v = NULL;
    size_t n = 0;
    int rc;

    if (open_db(dir, false, &st) < 0) {
        return SL_CMD_FAIL;
    }
    rc = sl_store_user_list(st, &v, &n);
    if (rc < 0) {
        sl_eprintf("user: cannot read the users: %s", sl_strerror(rc));
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        printf("%s %s %s %s\n", v[i].name, v[i].is_admin ? "admin" : "user",
               v[i].disabled ? "disabled" : "enabled", v[i].email != NULL ? v[i].email : "-");
    }
    if (rc == 0 && fflush(stdout) != 0) {
        rc = SL_EIO;
    }
    sl_store_free_users(v, n);
    sl_store_close(st);
    return rc == 0 ? SL_CMD_OK : SL_CMD_FAIL;
}

int sl_cmd_user(int argc, char **argv)
{
    const char *pos[3];
    size_t n_pos = 0;
    const char *data = NULL;
    const char *email = NULL;
    bool admin = false;
    const char *cmd;
    int rc;
    const struct sl_opt opts[] = {
        { "--admin", SL_OPT_FLAG, &admin, NULL, NULL, NULL, 0 },
        { "--email", SL_OPT_VALUE, NULL, &email, NULL, NULL, 0 },
        { "--data", SL_OPT_VALUE, NULL, &data, NULL, NULL, 0 },
    };

    if (!sl_opts_parse_or_usage("user", usage, argc, argv, opts, SL_ARRAY_LEN(opts), pos,
                                SL_ARRAY_LEN(pos), &n_pos, &rc)) {
        return rc;
    }
    cmd = n_pos > 0 ? pos[0] : "";
    if (strcmp(cmd, "list") == 0) {
        if (n_pos != 1 || admin || email != NULL) {
            sl_eprintf("user list: expected no argument but --data");
            return SL_CMD_USAGE;
        }
        return list_users(sl_opts_data_dir(data));
    }
    if (strcmp(cmd, "add") != 0 && strcmp(cmd, "disable") != 0 && strcmp(cmd, "enable") != 0) {
        sl_eprintf("user: expected `user add NAME`, `user disable NAME`, `user enable NAME` or "
                   "`user list` (see sluice user --help)");
        return SL_CMD_USAGE;
    }
    if (n_pos != 2 || pos[1][0] == '\0') {
        sl_eprintf("user %s: expected one NAME", cmd);
        return SL_CMD_USAGE;
    }
    if (strcmp(cmd, "add") != 0) {
        if (admin || email != NULL) {
            sl_eprintf("user %s: --admin and --email are for `user add`", cmd);
            return SL_CMD_USAGE;
        }
        return switch_user(sl_opts_data_dir(data), pos[1], strcmp(cmd, "disable") == 0);
    }
    if (!sl_user_name_is_valid(pos[1])) {
        sl_eprintf("user add: NAME must be 1-64 letters, digits, '.', '_' or '-', starting with a "
                   "letter or digit");
        return SL_CMD_USAGE;
    }
    if (email != NULL && !sl_user_email_is_valid(email)) {
        sl_eprintf("user add: --email must be an address like name@example.com");
        return SL_CMD_USAGE;
    }
    return add_user(sl_opts_data_dir(data), pos[1], admin, email);
}
