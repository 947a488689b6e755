/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/git/gitplat.c - what every git platform shares (see gitplat.h): the decisions made over
 * the operations (may a user use sandboxes of a repository, what git access a sandbox gets), the
 * checks of names, refs and globs, and `--git-url` taken apart.
 */
#include "control/git/gitplat.h"

#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "base/mem.h"
#include "base/slice.h"
#include "control/env/environment.h"
#include "policy/url.h"

const char *sl_git_access_name(enum sl_git_access access)
{
    switch (access) {
    case SL_GIT_ACCESS_NONE:
        return "none";
    case SL_GIT_ACCESS_READ:
        return "read";
    case SL_GIT_ACCESS_WRITE:
        return "write";
    }
    return "none";
}

void sl_gitplat_repo_finish(struct sl_gitplat_repo *r)
{
    sl_free(r->name);
    sl_free(r->default_branch);
    for (size_t i = 0; r->protected_branches != NULL && i < r->n_protected; i++) {
        sl_free(r->protected_branches[i]);
    }
    sl_free(r->protected_branches);
    memset(r, 0, sizeof(*r));
}

static void wipe_free(char *s)
{
    if (s != NULL) {
        sodium_memzero(s, strlen(s));
        sl_free(s);
    }
}

void sl_gitplat_credential_finish(struct sl_gitplat_credential *c)
{
    sl_free(c->header);
    wipe_free(c->value);
    for (size_t i = 0; i < c->n_redact && i < SL_ARRAY_LEN(c->redact); i++) {
        wipe_free(c->redact[i]);
    }
    memset(c, 0, sizeof(*c));
}

int sl_gitplat_may_use(struct sl_gitplat *gp, const char *name, const struct sl_gitplat_caller *who,
                       struct sl_gitplat_verdict *v)
{
    struct sl_gitplat_repo r;
    int rc;

    memset(v, 0, sizeof(*v));
    memset(&r, 0, sizeof(r));
    SL_TRY(gp->ops->role(gp, name, who->user_id, who->as_admin, &v->role));
    if (v->role == SL_REPO_ROLE_NONE) {
        v->status = 404;
        v->message = "repository not found";
        return 0;
    }
    rc = gp->ops->repo(gp, name, &r);
    if (rc == SL_ENOTFOUND) {
        v->status = 404;
        v->message = "repository not found";
        return 0;
    }
    SL_TRY(rc);
    if (r.archived) {
        v->status = 403;
        v->message = "repository is archived (read-only)";
    } else if (v->role < SL_REPO_ROLE_WRITE || !who->token_writes) {
        v->status = 403;
        v->message = "write access required";
    }
    sl_gitplat_repo_finish(&r);
    return 0;
}

enum sl_git_access sl_git_access_of(enum sl_repo_role at_creation, enum sl_repo_role now,
                                    bool archived)
{
    enum sl_repo_role role = at_creation < now ? at_creation : now;

    if (role == SL_REPO_ROLE_NONE) {
        return SL_GIT_ACCESS_NONE;
    }
    if (archived || role == SL_REPO_ROLE_READ) {
        return SL_GIT_ACCESS_READ;
    }
    return SL_GIT_ACCESS_WRITE;
}

/* ---- names, refs, globs -------------------------------------------------------------------- */

bool sl_git_repo_name_is_valid(const char *name)
{
    const char *slash = name != NULL ? strchr(name, '/') : NULL;

    return slash != NULL && strchr(slash + 1, '/') == NULL
           && sl_env_repo_is_valid(name, strlen(name));
}

/* The ref rules of gitplat.h; `glob` also takes `*`. */
static bool ref_ok(const char *r, size_t max, bool glob)
{
    size_t n = r != NULL ? strlen(r) : 0;

    if (n == 0 || n > max || r[0] == '-' || r[0] == '/' || r[n - 1] == '/' || r[n - 1] == '.'
        || strstr(r, "..") != NULL || strstr(r, "//") != NULL || strstr(r, "@{") != NULL
        || (n >= 5 && strcmp(r + n - 5, ".lock") == 0) || strcmp(r, "@") == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)r[i];

        if (c == '*' && glob) {
            continue;
        }
        if (c <= 0x20 || c >= 0x7F || strchr("~^:?*[\\", c) != NULL) {
            return false;
        }
    }
    return true;
}

bool sl_git_ref_is_valid(const char *ref)
{
    return ref_ok(ref, 255, false);
}

bool sl_git_branch_is_valid(const char *branch)
{
    return ref_ok(branch, SL_GIT_BRANCH_MAX, false);
}

bool sl_git_branch_glob_is_valid(const char *glob)
{
    return ref_ok(glob, SL_GIT_BRANCH_MAX, true);
}

/* ---- the remote ----------------------------------------------------------------------------- */

void sl_git_remote_finish(struct sl_gitplat_remote *r)
{
    sl_free(r->url);
    sl_free(r->host);
    sl_free(r->base_path);
    memset(r, 0, sizeof(*r));
}

/* A path of plain segments (or "/" alone): what the proxy can match literally. */
static bool plain_path(const char *p, size_t n)
{
    size_t seg = 0;

    for (size_t i = 1; i <= n; i++) {
        char c = i < n ? p[i] : '/';

        if (c == '/') {
            if (seg == 0 || (seg == 1 && p[i - 1] == '.')
                || (seg == 2 && p[i - 1] == '.' && p[i - 2] == '.')) {
                return false;
            }
            seg = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                   || c == '.' || c == '_' || c == '~' || c == '-') {
            seg++;
        } else {
            return false;
        }
    }
    return true;
}

int sl_git_remote_parse(const char *url, struct sl_gitplat_remote *out, char *err, size_t errlen)
{
    char host[SL_HOST_NAME_MAX + 8];
    const char *why = NULL;
    struct sl_url u;
    size_t n = url != NULL ? strlen(url) : 0;
    size_t plen;

    memset(out, 0, sizeof(*out));
    while (n > 0 && url[n - 1] == '/') {
        n--;
    }
    if (n == 0 || sl_url_parse(sl_slice_of(url, n), &u, &why) < 0) {
        sl_errf(err, errlen, "--git-url: bad URL: %s", why != NULL ? why : "malformed");
        return SL_EINVAL;
    }
    if (u.scheme != SL_URL_HTTPS || u.query.n > 0 || memchr(url, '#', n) != NULL) {
        sl_errf(err, errlen,
                "--git-url: an https:// URL without a query is required "
                "(the proxy injects the token over TLS only)");
        return SL_EINVAL;
    }
    plen = u.path.n == 1 && u.path.p[0] == '/' ? 0 : u.path.n;
    if (plen > 0 && !plain_path((const char *)u.path.p, plen)) {
        sl_errf(err, errlen,
                "--git-url: the path must be plain segments (letters, digits, '.', '_', '~', "
                "'-'; no '.' or '..' segment, no escapes)");
        return SL_EINVAL;
    }
    if (u.port_given && u.port != 443) {
        (void)snprintf(host, sizeof(host), "%s:%u", u.host.name, (unsigned)u.port);
    } else {
        (void)snprintf(host, sizeof(host), "%s", u.host.name);
    }
    out->url = sl_strndup(url, n);
    out->host = sl_strdup(host);
    out->base_path = sl_strndup((const char *)u.path.p, plen);
    if (out->url == NULL || out->host == NULL || out->base_path == NULL) {
        sl_git_remote_finish(out);
        return SL_ENOMEM;
    }
    return 0;
}

int sl_git_clone_url(const struct sl_gitplat_remote *r, const char *repo, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/%s.git", r->url, repo);

    return n >= 0 && (size_t)n < cap ? 0 : SL_ETOOBIG;
}
