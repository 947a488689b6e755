/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/git/test_gitplat.c - the git platform (control/git): the checks of refs,
 * branch names, globs and repository names; `--git-url` taken apart; the git access of a
 * sandbox from its creator's roles; and the local platform over a real store: roles (global
 * admins acting as such, public repositories, disabled users, members), who may use a
 * repository's sandboxes, a repository's metadata (a damaged record fails closed), and the
 * credential a sandbox gets.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <sodium.h>
#include <sqlite3.h>

#include "base/err.h"
#include "base/mem.h"
#include "control/git/gitlocal.h"
#include "control/git/gitplat.h"
#include "control/store/model.h"
#include "control/store/store.h"
#include "tests/support/tmpdir.h"

/* ---- pure checks ---- */

static void refs_branches_and_globs(void **state)
{
    static const char *const good_refs[] = { "main", "release/1.2", "v1", "feature-x_y",
                                             "0123456789abcdef0123456789abcdef01234567" };
    static const char *const bad_refs[] = { "",     "-x",    "/main",  "main/", "a..b",
                                            "a//b", "a@{1}", "x.lock", "@",     "has space",
                                            "a~1",  "a^",    "a:b",    "a?",    "a*",
                                            "a[b",  "a\\b",  "end.",   "\x01" };
    char long_ref[300];

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(good_refs); i++) {
        assert_true(sl_git_ref_is_valid(good_refs[i]));
        assert_true(sl_git_branch_is_valid(good_refs[i]));
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(bad_refs); i++) {
        if (sl_git_ref_is_valid(bad_refs[i])) {
            fail_msg("ref '%s' was taken", bad_refs[i]);
        }
    }
    memset(long_ref, 'a', sizeof(long_ref));
    long_ref[255] = '\0';
    assert_true(sl_git_ref_is_valid(long_ref));
    long_ref[255] = 'a';
    long_ref[256] = '\0';
    assert_false(sl_git_ref_is_valid(long_ref));
    assert_false(sl_git_ref_is_valid(NULL));

    /* Globs: a branch name where `*` is also allowed, nothing else more. */
    assert_true(sl_git_branch_glob_is_valid("release/*"));
    assert_true(sl_git_branch_glob_is_valid("*"));
    assert_true(sl_git_branch_glob_is_valid("hotfix-*-x"));
    assert_false(sl_git_branch_glob_is_valid("release/[0-9]"));
    assert_false(sl_git_branch_glob_is_valid("a..*"));
    assert_false(sl_git_branch_glob_is_valid("-*"));
    assert_false(sl_git_branch_glob_is_valid(""));
    assert_false(sl_git_branch_is_valid("release/*"));
}

static void repository_names(void **state)
{
    (void)state;
    assert_true(sl_git_repo_name_is_valid("acme/site"));
    assert_true(sl_git_repo_name_is_valid("A-1/b_2.c"));
    assert_false(sl_git_repo_name_is_valid("acme"));
    assert_false(sl_git_repo_name_is_valid("group/sub/repo"));
    assert_false(sl_git_repo_name_is_valid("acme/.."));
    assert_false(sl_git_repo_name_is_valid("./site"));
    assert_false(sl_git_repo_name_is_valid("acme/si te"));
    assert_false(sl_git_repo_name_is_valid("acme/"));
    assert_false(sl_git_repo_name_is_valid(NULL));
}

static void the_remote_is_taken_apart(void **state)
{
    static const struct {
        const char *url;
        const char *host;
        const char *base;
        const char *clone;
    } good[] = {
        { "https://git.example.com", "git.example.com", "",
          "https://git.example.com/acme/site.git" },
        { "https://Git.Example.COM:443/", "git.example.com", "",
          "https://Git.Example.COM:443/acme/site.git" },
        { "https://git.example.com:8443/git/", "git.example.com:8443", "/git",
          "https://git.example.com:8443/git/acme/site.git" },
        { "https://10.0.0.7:3000/a/b~c", "10.0.0.7:3000", "/a/b~c",
          "https://10.0.0.7:3000/a/b~c/acme/site.git" },
    };

    static const char *const bad[] = {
        "http://git.example.com",
        "https://git.example.com/?x=1",
        "https://x/a/../b",
        "https://x/a/./b",
        "https://x/a%20b",
        "https://x/a//b",
        "ftp://git.example.com",
        "git.example.com",
        "",
        "https://x/#frag",
        "https://x/a b",
    };
    struct sl_gitplat_remote r;
    char err[256];
    char clone[512];

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(good); i++) {
        assert_int_equal(sl_git_remote_parse(good[i].url, &r, err, sizeof(err)), 0);
        assert_string_equal(r.host, good[i].host);
        assert_string_equal(r.base_path, good[i].base);
        assert_int_equal(sl_git_clone_url(&r, "acme/site", clone, sizeof(clone)), 0);
        assert_string_equal(clone, good[i].clone);
        assert_int_equal(sl_git_clone_url(&r, "acme/site", clone, 10), SL_ETOOBIG);
        sl_git_remote_finish(&r);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        err[0] = '\0';
        if (sl_git_remote_parse(bad[i], &r, err, sizeof(err)) != SL_EINVAL) {
            fail_msg("--git-url '%s' was taken", bad[i]);
        }
        assert_memory_equal(err, "--git-url: ", 11);
    }
}

/* min(role at creation, role now, write); read while archived; none below read. */
static void the_git_access_of_a_sandbox(void **state)
{
    (void)state;
    assert_int_equal(sl_git_access_of(SL_REPO_ROLE_ADMIN, SL_REPO_ROLE_ADMIN, false),
                     SL_GIT_ACCESS_WRITE);
    assert_int_equal(sl_git_access_of(SL_REPO_ROLE_WRITE, SL_REPO_ROLE_ADMIN, false),
                     SL_GIT_ACCESS_WRITE);
    assert_int_equal(sl_git_access_of(SL_REPO_ROLE_WRITE, SL_REPO_ROLE_READ, false),
                     SL_GIT_ACCESS_READ);
    assert_int_equal(sl_git_access_of(SL_REPO_ROLE_READ, SL_REPO_ROLE_ADMIN, false),
                     SL_GIT_ACCESS_READ);
    assert_int_equal(sl_git_access_of(SL_REPO_ROLE_ADMIN, SL_REPO_ROLE_WRITE, true),
                     SL_GIT_ACCESS_READ);
    assert_int_equal(sl_git_access_of(SL_REPO_ROLE_WRITE, SL_REPO_ROLE_NONE, false),
                     SL_GIT_ACCESS_NONE);
    assert_int_equal(sl_git_access_of(SL_REPO_ROLE_NONE, SL_REPO_ROLE_WRITE, true),
                     SL_GIT_ACCESS_NONE);
    assert_string_equal(sl_git_access_name(SL_GIT_ACCESS_WRITE), "write");
    assert_string_equal(sl_git_access_name(SL_GIT_ACCESS_READ), "read");
}

/* ---- the local platform ---- */

struct fixture {
    char dir[64];
    char path[PATH_MAX];
    struct sl_store *st;
    struct sl_gitplat *gp;
    struct sl_user root;
    struct sl_user alice;
    struct sl_user bob;
    struct sl_user carol;
};

static void add_repo(struct fixture *f, const char *name, bool is_public, bool archived)
{
    struct sl_store_repo r = { 0 };

    r.name = sl_strdup(name);
    r.default_branch = sl_strdup("main");
    r.protected_json = sl_strdup("[\"release/*\",\"prod\"]");
    r.is_public = is_public;
    r.archived = archived;
    assert_int_equal(sl_store_repo_put(f->st, &r, NULL), 0);
    sl_store_repo_finish(&r);
}

static int setup(void **state)
{
    struct fixture *f = sl_calloc(1, sizeof(*f));
    struct sl_store_user_change off = { .set_disabled = true, .disabled = true };
    char err[256] = "";

    assert_non_null(f);
    assert_int_equal(sl_test_tmpdir(f->dir, sizeof(f->dir), "sl-git"), 0);
    assert_int_equal(sl_test_join(f->path, sizeof(f->path), f->dir, "sluice.db"), 0);
    assert_int_equal(sl_store_open(f->path, &f->st, err, sizeof(err)), 0);
    assert_int_equal(sl_gitlocal_create(f->st, &f->gp), 0);
    assert_int_equal(sl_store_user_create(f->st, "root", true, NULL, &f->root), 0);
    assert_int_equal(sl_store_user_create(f->st, "alice", false, NULL, &f->alice), 0);
    assert_int_equal(sl_store_user_create(f->st, "bob", false, NULL, &f->bob), 0);
    assert_int_equal(sl_store_user_create(f->st, "carol", false, NULL, &f->carol), 0);
    add_repo(f, "acme/site", false, false);
    add_repo(f, "acme/open", true, false);
    add_repo(f, "acme/old", false, true);
    assert_int_equal(sl_store_member_put(f->st, "acme/site", f->alice.id, SL_REPO_ROLE_WRITE, NULL),
                     0);
    assert_int_equal(sl_store_member_put(f->st, "acme/site", f->bob.id, SL_REPO_ROLE_ADMIN, NULL),
                     0);
    assert_int_equal(sl_store_member_put(f->st, "acme/old", f->alice.id, SL_REPO_ROLE_WRITE, NULL),
                     0);
    assert_int_equal(sl_store_member_put(f->st, "acme/open", f->carol.id, SL_REPO_ROLE_WRITE, NULL),
                     0);
    assert_int_equal(sl_store_user_update(f->st, "bob", &off, NULL), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    f->gp->ops->destroy(f->gp);
    sl_store_close(f->st);
    sl_user_finish(&f->root);
    sl_user_finish(&f->alice);
    sl_user_finish(&f->bob);
    sl_user_finish(&f->carol);
    assert_int_equal(sl_test_rmtree(f->dir), 0);
    sl_free(f);
    return 0;
}

static enum sl_repo_role role_of(struct fixture *f, const char *repo, const char *user_id,
                                 bool as_admin)
{
    enum sl_repo_role r = SL_REPO_ROLE_ADMIN;

    assert_int_equal(f->gp->ops->role(f->gp, repo, user_id, as_admin, &r), 0);
    return r;
}

static void roles_follow_every_rule(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(role_of(f, "acme/site", f->alice.id, false), SL_REPO_ROLE_WRITE);
    /* A global admin is an admin everywhere, when acting as one (an admin token). */
    assert_int_equal(role_of(f, "acme/site", f->root.id, true), SL_REPO_ROLE_ADMIN);
    assert_int_equal(role_of(f, "acme/site", f->root.id, false), SL_REPO_ROLE_NONE);
    assert_int_equal(role_of(f, "acme/open", f->root.id, false), SL_REPO_ROLE_READ);
    /* A public repository: everyone reads; a member keeps a higher role. */
    assert_int_equal(role_of(f, "acme/open", f->alice.id, false), SL_REPO_ROLE_READ);
    assert_int_equal(role_of(f, "acme/open", f->carol.id, false), SL_REPO_ROLE_WRITE);
    /* Disabled: nothing, whatever the membership. */
    assert_int_equal(role_of(f, "acme/site", f->bob.id, true), SL_REPO_ROLE_NONE);
    assert_int_equal(role_of(f, "acme/open", f->bob.id, false), SL_REPO_ROLE_NONE);
    /* Unknown users and repositories. */
    assert_int_equal(role_of(f, "acme/site", "no-such-user", true), SL_REPO_ROLE_NONE);
    assert_int_equal(role_of(f, "acme/none", f->root.id, true), SL_REPO_ROLE_NONE);
    assert_int_equal(role_of(f, "acme/site", f->carol.id, false), SL_REPO_ROLE_NONE);
}

static void may_use(struct fixture *f, const char *repo, const char *user_id, bool as_admin,
                    bool writes, int status, const char *message)
{
    struct sl_gitplat_caller who = { user_id, as_admin, writes };
    struct sl_gitplat_verdict v;

    assert_int_equal(sl_gitplat_may_use(f->gp, repo, &who, &v), 0);
    if (v.status != status
        || (message != NULL && (v.message == NULL || strcmp(v.message, message) != 0))) {
        fail_msg("%s as %s: %d %s, want %d %s", repo, user_id, v.status,
                 v.message != NULL ? v.message : "-", status, message != NULL ? message : "-");
    }
}

static void who_may_use_sandboxes(void **state)
{
    struct fixture *f = *state;

    may_use(f, "acme/site", f->alice.id, false, true, 0, NULL);
    may_use(f, "acme/site", f->alice.id, false, false, 403, "write access required");
    may_use(f, "acme/site", f->carol.id, false, true, 404, "repository not found");
    may_use(f, "acme/none", f->alice.id, false, true, 404, "repository not found");
    may_use(f, "acme/open", f->alice.id, false, true, 403, "write access required");
    may_use(f, "acme/open", f->carol.id, false, true, 0, NULL);
    may_use(f, "acme/old", f->alice.id, false, true, 403, "repository is archived (read-only)");
    may_use(f, "acme/old", f->alice.id, false, false, 403, "repository is archived (read-only)");
    may_use(f, "acme/site", f->root.id, true, true, 0, NULL);
    may_use(f, "acme/site", f->root.id, false, true, 404, "repository not found");
    may_use(f, "acme/site", f->bob.id, true, true, 404, "repository not found");
}

static void repository_metadata_and_damage(void **state)
{
    struct fixture *f = *state;
    struct sl_gitplat_repo r = { 0 };
    sqlite3 *db = NULL;

    assert_int_equal(f->gp->ops->repo(f->gp, "acme/site", &r), 0);
    assert_string_equal(r.name, "acme/site");
    assert_string_equal(r.default_branch, "main");
    assert_int_equal(r.n_protected, 2);
    assert_string_equal(r.protected_branches[0], "release/*");
    assert_string_equal(r.protected_branches[1], "prod");
    assert_false(r.is_public);
    assert_false(r.archived);
    sl_gitplat_repo_finish(&r);
    assert_int_equal(f->gp->ops->repo(f->gp, "acme/none", &r), SL_ENOTFOUND);

    /* A record changed behind the API's back fails closed. */
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE repos SET protected_json = '[\"ok\",\"bad..glob\"]' "
                                  "WHERE name = 'acme/site';"
                                  "UPDATE repos SET protected_json = 'not json' "
                                  "WHERE name = 'acme/open';"
                                  "UPDATE repos SET default_branch = '-x' WHERE name = 'acme/old'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
    assert_int_equal(f->gp->ops->repo(f->gp, "acme/site", &r), SL_EIO);
    assert_null(r.name);
    assert_int_equal(f->gp->ops->repo(f->gp, "acme/open", &r), SL_EIO);
    assert_int_equal(f->gp->ops->repo(f->gp, "acme/old", &r), SL_EIO);
}

static void the_credential_of_a_sandbox(void **state)
{
    struct fixture *f = *state;
    struct sl_gitplat_credential c = { 0 };
    char err[256];
    char b64[128];

    assert_null(f->gp->remote);
    assert_int_equal(
            f->gp->ops->credential(f->gp, "acme/site", f->alice.id, SL_GIT_ACCESS_WRITE, &c),
            SL_ENOTFOUND);
    assert_int_equal(
            sl_gitlocal_set_remote(f->gp, "https://git.example.com/x", NULL, err, sizeof(err)),
            SL_EINVAL);
    assert_string_equal(err, "--git-token: a token (one line) is required with --git-url");
    assert_int_equal(
            sl_gitlocal_set_remote(f->gp, "https://git.example.com/x", "a\nb", err, sizeof(err)),
            SL_EINVAL);
    assert_int_equal(
            sl_gitlocal_set_remote(f->gp, "http://git.example.com", "tok", err, sizeof(err)),
            SL_EINVAL);
    assert_null(f->gp->remote);
    assert_int_equal(sl_gitlocal_set_remote(f->gp, "https://git.example.com:8443/x/", "gt-secret",
                                            err, sizeof(err)),
                     0);
    assert_non_null(f->gp->remote);
    assert_string_equal(f->gp->remote->host, "git.example.com:8443");
    assert_string_equal(f->gp->remote->base_path, "/x");
    assert_string_equal(f->gp->remote->url, "https://git.example.com:8443/x");
    assert_int_equal(
            f->gp->ops->credential(f->gp, "acme/site", f->alice.id, SL_GIT_ACCESS_WRITE, &c), 0);
    (void)sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)"x-access-token:gt-secret",
                            strlen("x-access-token:gt-secret"), sodium_base64_VARIANT_ORIGINAL);
    assert_string_equal(c.header, "Authorization");
    assert_true(strncmp(c.value, "Basic ", 6) == 0);
    assert_string_equal(c.value + 6, b64);
    /* What command output must never show: the token and its encoded form. */
    assert_int_equal(c.n_redact, 2);
    assert_string_equal(c.redact[0], "gt-secret");
    assert_string_equal(c.redact[1], b64);
    f->gp->ops->revoke(f->gp, &c);
    sl_gitplat_credential_finish(&c);
    assert_null(c.value);
}

int main(void)
{
    json_set_alloc_funcs(sl_malloc, sl_free);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refs_branches_and_globs),
        cmocka_unit_test(repository_names),
        cmocka_unit_test(the_remote_is_taken_apart),
        cmocka_unit_test(the_git_access_of_a_sandbox),
        T(roles_follow_every_rule),
        T(who_may_use_sandboxes),
        T(repository_metadata_and_damage),
        T(the_credential_of_a_sandbox),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
