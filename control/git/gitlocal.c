/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/git/gitlocal.c - the local git platform (see gitlocal.h): the operations of gitplat.h
 * over sluice's store and the operator's `--git-url` and `--git-token`.
 */
#include "control/git/gitlocal.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "base/log.h"
#include "base/mem.h"

#define TOKEN_MAX 300

struct local {
    struct sl_gitplat gp;
    /* Borrowed. */
    struct sl_store *st;
    struct sl_gitplat_remote remote;
    /* `--git-token`, copied; NULL without a remote. */
    char *token;
};

static struct local *local_of(struct sl_gitplat *gp)
{
    return SL_CONTAINER_OF(gp, struct local, gp);
}

/* The stored protected globs: a JSON array of valid globs, as the API wrote it. */
static int parse_protected(const char *json, struct sl_gitplat_repo *out)
{
    json_t *arr = json_loads(json, JSON_REJECT_DUPLICATES, NULL);
    size_t i;
    json_t *g;

    if (!json_is_array(arr) || json_array_size(arr) > SL_GIT_PROTECTED_MAX) {
        json_decref(arr);
        return SL_EIO;
    }
    out->protected_branches = sl_calloc(json_array_size(arr) + 1, sizeof(char *));
    if (out->protected_branches == NULL) {
        json_decref(arr);
        return SL_ENOMEM;
    }
    json_array_foreach(arr, i, g)
    {
        if (!json_is_string(g) || !sl_git_branch_glob_is_valid(json_string_value(g))) {
            json_decref(arr);
            return SL_EIO;
        }
        out->protected_branches[i] = sl_strdup(json_string_value(g));
        if (out->protected_branches[i] == NULL) {
            json_decref(arr);
            return SL_ENOMEM;
        }
        out->n_protected = i + 1;
    }
    json_decref(arr);
    return 0;
}

static int local_repo(struct sl_gitplat *gp, const char *name, struct sl_gitplat_repo *out)
{
    struct sl_store_repo r;
    int rc;

    memset(out, 0, sizeof(*out));
    memset(&r, 0, sizeof(r));
    SL_TRY(sl_store_repo_get(local_of(gp)->st, name, &r));
    out->is_public = r.is_public;
    out->archived = r.archived;
    out->name = r.name;
    out->default_branch = r.default_branch;
    r.name = NULL;
    r.default_branch = NULL;
    rc = sl_git_branch_is_valid(out->default_branch) ? parse_protected(r.protected_json, out)
                                                     : SL_EIO;
    if (rc == SL_EIO) {
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"a repository's stored default or protected branches are damaged; its "
               "sandboxes get no git access\" repo=%s",
               name);
    }
    sl_store_repo_finish(&r);
    if (rc < 0) {
        sl_gitplat_repo_finish(out);
    }
    return rc;
}

static int local_role(struct sl_gitplat *gp, const char *name, const char *user_id, bool as_admin,
                      enum sl_repo_role *out)
{
    struct local *l = local_of(gp);
    struct sl_store_repo r;
    struct sl_user u;
    enum sl_repo_role member = SL_REPO_ROLE_NONE;
    int rc;

    *out = SL_REPO_ROLE_NONE;
    memset(&u, 0, sizeof(u));
    memset(&r, 0, sizeof(r));
    rc = sl_store_user_get(l->st, user_id, &u);
    if (rc == 0) {
        rc = sl_store_repo_get(l->st, name, &r);
    }
    if (rc == 0 && !u.disabled) {
        rc = sl_store_member_role(l->st, name, user_id, &member);
        if (r.is_public && member < SL_REPO_ROLE_READ) {
            member = SL_REPO_ROLE_READ;
        }
        *out = u.is_admin && as_admin ? SL_REPO_ROLE_ADMIN : member;
    }
    sl_user_finish(&u);
    sl_store_repo_finish(&r);
    if (rc < 0) {
        *out = SL_REPO_ROLE_NONE;
    }
    return rc == SL_ENOTFOUND ? 0 : rc;
}

static int local_credential(struct sl_gitplat *gp, const char *name, const char *user_id,
                            enum sl_git_access access, struct sl_gitplat_credential *out)
{
    struct local *l = local_of(gp);
    char plain[TOKEN_MAX + 32];
    size_t b64;
    int rc = 0;

    (void)name;
    (void)user_id;
    (void)access;
    memset(out, 0, sizeof(*out));
    if (l->token == NULL) {
        return SL_ENOTFOUND;
    }
    (void)snprintf(plain, sizeof(plain), "x-access-token:%s", l->token);
    b64 = sodium_base64_ENCODED_LEN(strlen(plain), sodium_base64_VARIANT_ORIGINAL);
    out->header = sl_strdup("Authorization");
    out->value = sl_malloc(strlen("Basic ") + b64);
    out->redact[0] = sl_strdup(l->token);
    out->redact[1] = sl_malloc(b64);
    out->n_redact = 2;
    if (out->header == NULL || out->value == NULL || out->redact[0] == NULL
        || out->redact[1] == NULL) {
        rc = SL_ENOMEM;
    } else {
        (void)sodium_bin2base64(out->redact[1], b64, (const unsigned char *)plain, strlen(plain),
                                sodium_base64_VARIANT_ORIGINAL);
        (void)snprintf(out->value, strlen("Basic ") + b64, "Basic %s", out->redact[1]);
    }
    sodium_memzero(plain, sizeof(plain));
    if (rc < 0) {
        sl_gitplat_credential_finish(out);
    }
    return rc;
}

/* The credential is the operator's token: it lives on in other sandboxes' entries, and this
 * sandbox's entry left the snapshot already. Nothing to call. */
static void local_revoke(struct sl_gitplat *gp, const struct sl_gitplat_credential *c)
{
    (void)gp;
    (void)c;
}

static void local_destroy(struct sl_gitplat *gp)
{
    struct local *l;

    if (gp == NULL) {
        return;
    }
    l = local_of(gp);
    if (l->token != NULL) {
        sodium_memzero(l->token, strlen(l->token));
        sl_free(l->token);
    }
    sl_git_remote_finish(&l->remote);
    sl_free(l);
}

static const struct sl_gitplat_ops local_ops = {
    .name = "local",
    .repo = local_repo,
    .role = local_role,
    .credential = local_credential,
    .revoke = local_revoke,
    .destroy = local_destroy,
};

int sl_gitlocal_create(struct sl_store *st, struct sl_gitplat **out)
{
    struct local *l = sl_calloc(1, sizeof(*l));

    if (l == NULL) {
        return SL_ENOMEM;
    }
    l->gp.ops = &local_ops;
    l->st = st;
    *out = &l->gp;
    return 0;
}

int sl_gitlocal_set_remote(struct sl_gitplat *gp, const char *url, const char *token, char *err,
                           size_t errlen)
{
    struct local *l = local_of(gp);

    SL_TRY(sl_git_remote_parse(url, &l->remote, err, errlen));
    if (token == NULL || token[0] == '\0' || strpbrk(token, "\r\n") != NULL
        || strlen(token) > TOKEN_MAX) {
        sl_git_remote_finish(&l->remote);
        sl_errf(err, errlen, "--git-token: a token (one line) is required with --git-url");
        return SL_EINVAL;
    }
    l->token = sl_strdup(token);
    if (l->token == NULL) {
        sl_git_remote_finish(&l->remote);
        return SL_ENOMEM;
    }
    gp->remote = &l->remote;
    return 0;
}
