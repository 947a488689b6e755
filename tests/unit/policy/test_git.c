/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/policy/test_git.c - a client's `git` object (docs/reference/snapshot.md §3): every
 * field's validation with its JSON path, the own-repository path matcher on every edge (base
 * path, `.git`, queries, methods, percent-encoding, dot segments, "//", prefixes of other
 * repositories), the protected-branch test, and the decision on the git host (which credential,
 * git-read-only, TRACE, plain HTTP, a rule's credential left out).
 *
 * JSON is written with single quotes; sl_test_sqjson() turns them into double quotes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/buf.h"
#include "policy/decision.h"
#include "policy/git.h"
#include "policy/host.h"
#include "policy/snapshot.h"
#include "tests/support/lines.h"
#include "tests/support/sqjson.h"

#define NOW 1795996800

#define GIT_OK                                                            \
    "'host':'git.example.test:8443','repo':'acme/site','access':'write'," \
    "'credential':{'header':'Authorization','value':'Basic Z2l0'},'default_branch':'main'"
#define DOC_GIT(g)                                                                                \
    "{'version':1,'environments':{'e':{'default':'deny'}},'clients':[{'id':'sb','ip':'10.0.0.1'," \
    "'environment':'e','git':" g "}]}"

static void error_line(const void *list, size_t i, char *out, size_t cap)
{
    const struct sl_policy_errors *errs = list;

    (void)snprintf(out, cap, "%s: %s", errs->items[i].path, errs->items[i].message);
}

static struct sl_snapshot *parse(const char *text, struct sl_policy_errors *errs)
{
    struct sl_buf b;
    struct sl_snapshot *s = NULL;
    int rc;

    sl_buf_init(&b, 1 << 20);
    assert_int_equal(sl_test_sqjson(&b, text), 0);
    rc = sl_snapshot_parse(b.p, b.len, &s, errs);
    assert_true(rc == 0 || rc == SL_EPOLICY);
    sl_buf_finish(&b);
    return s;
}

static void expect_errors(const char *text, const char *const *want)
{
    struct sl_policy_errors errs = { NULL, 0, false };
    struct sl_snapshot *s = parse(text, &errs);
    char why[2048];

    if (sl_test_lines_check(error_line, &errs, errs.count, want, why, sizeof(why)) != 0) {
        fail_msg("errors of %s: %s", text, why);
    }
    if (want[0] == NULL) {
        assert_non_null(s);
    } else {
        assert_null(s);
    }
    sl_snapshot_unref(s);
    sl_policy_errors_finish(&errs);
}

#define EXPECT(text, ...)  expect_errors((text), SL_TEST_LINES(__VA_ARGS__))
#define EXPECT_VALID(text) EXPECT((text), NULL)

static void accepts_a_full_git_object(void **state)
{
    struct sl_snapshot *s;
    const struct sl_git *g;

    (void)state;
    EXPECT_VALID(DOC_GIT("{" GIT_OK "}"));
    EXPECT_VALID(DOC_GIT("{" GIT_OK ",'base_path':'','protected_branches':[]}"));
    s = parse(DOC_GIT("{" GIT_OK ",'base_path':'/git/v~1','protected_branches':['release/*',"
                      "'hotfix-*','*/stable']}"),
              NULL);
    assert_non_null(s);
    g = sl_client_git(sl_snapshot_find_client(s, "sb"));
    assert_non_null(g);
    assert_string_equal(sl_git_repo(g), "acme/site");
    assert_true(sl_git_can_write(g));
    assert_string_equal(sl_git_default_branch(g), "main");
    assert_int_equal(sl_git_protected_count(g), 3);
    assert_string_equal(sl_git_protected(g, 2), "*/stable");
    /* The git credential counts among the snapshot's credentials. */
    assert_int_equal(sl_snapshot_credential_count(s), 1);
    sl_snapshot_unref(s);
    /* Read access; no git object at all. */
    s = parse(DOC_GIT("{'host':'g.test','repo':'a/b','access':'read','credential':{'header':'A',"
                      "'value':'v'},'default_branch':'main'}"),
              NULL);
    assert_non_null(s);
    assert_false(sl_git_can_write(sl_client_git(sl_snapshot_find_client(s, "sb"))));
    sl_snapshot_unref(s);
    s = parse("{'version':1,'environments':{'e':{'default':'deny'}},'clients':[{'id':'x','ip':"
              "'10.0.0.2','environment':'e'}]}",
              NULL);
    assert_null(sl_client_git(sl_snapshot_find_client(s, "x")));
    sl_snapshot_unref(s);
}

static void reports_every_field_with_its_path(void **state)
{
    (void)state;
    EXPECT(DOC_GIT("'x'"), "$.clients[0].git: must be an object (host, repo, access, credential, "
                           "default_branch, ...)");
    EXPECT(DOC_GIT("{}"), "$.clients[0].git.host: required field missing",
           "$.clients[0].git.repo: required field missing",
           "$.clients[0].git.access: required field missing",
           "$.clients[0].git.credential: required field missing",
           "$.clients[0].git.default_branch: required field missing");
    EXPECT(DOC_GIT("{" GIT_OK ",'branch':'x'}"),
           "$.clients[0].git.branch: unknown field (expected host, base_path, repo, access, "
           "credential, default_branch, protected_branches)");
    EXPECT(DOC_GIT("{" GIT_OK ",'access':'admin'}"), "*");
    EXPECT(DOC_GIT("{'host':'git.example.test','repo':'a/b','access':'admin','credential':"
                   "{'header':'Authorization','value':'v'},'default_branch':'main'}"),
           "$.clients[0].git.access: must be \"read\" or \"write\"");
    EXPECT(DOC_GIT("{'host':'*.example.test','repo':'a/b','access':'read','credential':"
                   "{'header':'Authorization','value':'v'},'default_branch':'main'}"),
           "$.clients[0].git.host: bad host \"*.example.test\": *");
    EXPECT(DOC_GIT("{'host':'git.example.test:0','repo':'a/b','access':'read','credential':"
                   "{'header':'Authorization','value':'v'},'default_branch':'main'}"),
           "$.clients[0].git.host: bad host \"git.example.test:0\": *");
    EXPECT(DOC_GIT("{'host':'git.example.test','repo':'a/b','access':'read','credential':"
                   "{'header':'Host','value':'v'},'default_branch':'main'}"),
           "$.clients[0].git.credential.header: \"Host\" *");
    EXPECT(DOC_GIT("{'host':'git.example.test','repo':'a/b','access':'read','credential':"
                   "{'header':'Authorization','value':' v'},'default_branch':'main'}"),
           "$.clients[0].git.credential.value: *");
    EXPECT(DOC_GIT("{'host':'git.example.test','repo':'a/b','access':'read','credential':"
                   "'x','default_branch':'main'}"),
           "$.clients[0].git.credential: must be an object with \"header\" and \"value\"");
    EXPECT(DOC_GIT("{'host':7,'repo':'a/b','access':'read','credential':"
                   "{'header':'Authorization','value':'v'},'default_branch':'main'}"),
           "$.clients[0].git.host: must be a string");
}

static void validates_repository_paths(void **state)
{
    static const char *const good[] = { "a", "acme/site", "a/b/c/d/e/f/g/h", ".github/x",
                                        "A-b_c.d/e" };
    static const char *const bad[] = { "",       "/a", "a/",  "a//b", "a/./b",
                                       "a/../b", "..", "a b", "a%2f", "a/b/c/d/e/f/g/h/i",
                                       "a\\\\b", "é/x" };
    char doc[1024];

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(good); i++) {
        (void)snprintf(doc, sizeof(doc),
                       DOC_GIT("{'host':'g.test','repo':'%s','access':'read','credential':"
                               "{'header':'A','value':'v'},'default_branch':'main'}"),
                       good[i]);
        EXPECT_VALID(doc);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        (void)snprintf(doc, sizeof(doc),
                       DOC_GIT("{'host':'g.test','repo':'%s','access':'read','credential':"
                               "{'header':'A','value':'v'},'default_branch':'main'}"),
                       bad[i]);
        EXPECT(doc, "$.clients[0].git.repo: *");
    }
    EXPECT(DOC_GIT("{'host':'g.test','repo':'a//b','access':'read','credential':{'header':'A',"
                   "'value':'v'},'default_branch':'main'}"),
           "$.clients[0].git.repo: \"a//b\" is not a repository path (\"owner/name\": 1-8 "
           "segments of A-Z a-z 0-9 . _ -, none \".\" or \"..\", at most 255 bytes)");
    /* 255 bytes in all. */
    {
        char repo[300];

        memset(repo, 'r', sizeof(repo));
        repo[1] = '/';
        repo[255] = '\0';
        (void)snprintf(doc, sizeof(doc),
                       DOC_GIT("{'host':'g.test','repo':'%s','access':'read','credential':"
                               "{'header':'A','value':'v'},'default_branch':'main'}"),
                       repo);
        EXPECT_VALID(doc);
        repo[255] = 'r';
        repo[256] = '\0';
        (void)snprintf(doc, sizeof(doc),
                       DOC_GIT("{'host':'g.test','repo':'%s','access':'read','credential':"
                               "{'header':'A','value':'v'},'default_branch':'main'}"),
                       repo);
        EXPECT(doc, "$.clients[0].git.repo: \"r/rrrr*");
    }
}

static void validates_base_paths(void **state)
{
    static const char *const good[] = { "", "/git", "/a/b~c/d-e.f_g" };
    static const char *const bad[] = { "git",  "/",     "/git/", "//git", "/a/../b",
                                       "/./a", "/a%20", "/a b",  "/a;b" };
    char doc[1024];

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(good); i++) {
        (void)snprintf(doc, sizeof(doc), DOC_GIT("{" GIT_OK ",'base_path':'%s'}"), good[i]);
        EXPECT_VALID(doc);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        (void)snprintf(doc, sizeof(doc), DOC_GIT("{" GIT_OK ",'base_path':'%s'}"), bad[i]);
        EXPECT(doc, "$.clients[0].git.base_path: must be \"\" or a path like \"/git\"*");
    }
}

static void validates_branch_names_and_globs(void **state)
{
    static const char *const good[] = { "main", "release/1.2", "a-b_c", "x@y", "ünï" };
    static const char *const bad[] = { "",        "a b",  "a..b",   "a~1",   "a^",    "a:b",
                                       "a?",      "a[1]", "a\\\\b", "/main", "main/", "a//b",
                                       ".hidden", "a/.b", "x.lock", "a.",    "-main", "a@{1}" };
    char doc[1024];
    char name[300];

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(good); i++) {
        (void)snprintf(doc, sizeof(doc),
                       DOC_GIT("{'host':'g.test','repo':'a/b','access':'read','credential':"
                               "{'header':'A','value':'v'},'default_branch':'%s',"
                               "'protected_branches':['%s','%s/*']}"),
                       good[i], good[i], good[i]);
        EXPECT_VALID(doc);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        (void)snprintf(doc, sizeof(doc),
                       DOC_GIT("{'host':'g.test','repo':'a/b','access':'read','credential':"
                               "{'header':'A','value':'v'},'default_branch':'%s',"
                               "'protected_branches':['ok','%s']}"),
                       bad[i], bad[i]);
        EXPECT(doc, "$.clients[0].git.default_branch: *",
               "$.clients[0].git.protected_branches[1]: *");
    }
    /* '*' is a glob character, never part of a default branch. */
    EXPECT(DOC_GIT("{'host':'g.test','repo':'a/b','access':'read','credential':{'header':'A',"
                   "'value':'v'},'default_branch':'ma*n','protected_branches':['*','**']}"),
           "$.clients[0].git.default_branch: \"ma*n\" is not a branch name: it has a character "
           "a branch name cannot have *");
    memset(name, 'b', sizeof(name));
    name[255] = '\0';
    (void)snprintf(doc, sizeof(doc), DOC_GIT("{" GIT_OK ",'protected_branches':['%s']}"), name);
    EXPECT_VALID(doc);
    name[255] = 'b';
    name[256] = '\0';
    (void)snprintf(doc, sizeof(doc), DOC_GIT("{" GIT_OK ",'protected_branches':['%s']}"), name);
    EXPECT(doc, "$.clients[0].git.protected_branches[0]: \"bbbb*");
    EXPECT(DOC_GIT("{" GIT_OK ",'protected_branches':['a..b','x.lock','a b']}"),
           "$.clients[0].git.protected_branches[0]: \"a..b\" is not a branch glob: it has \"..\"",
           "$.clients[0].git.protected_branches[1]: \"x.lock\" is not a branch glob: it has a "
           "part that ends with \".lock\"",
           "$.clients[0].git.protected_branches[2]: \"a b\" is not a branch glob: it has a "
           "character a branch name cannot have (space, control, ~ ^ : ? [ \\)");
    EXPECT(DOC_GIT("{" GIT_OK ",'protected_branches':'release/*'}"),
           "$.clients[0].git.protected_branches: must be an array of branch globs *");
    EXPECT(DOC_GIT("{" GIT_OK ",'protected_branches':[7]}"),
           "$.clients[0].git.protected_branches[0]: must be a string");
}

static void caps_the_protected_list(void **state)
{
    struct sl_buf b;
    char doc[4096];

    (void)state;
    sl_buf_init(&b, 4096);
    for (int i = 0; i < 33; i++) {
        assert_int_equal(sl_buf_printf(&b, "%s'p%d'", i > 0 ? "," : "", i), 0);
        if (i == 31) {
            (void)snprintf(doc, sizeof(doc), DOC_GIT("{" GIT_OK ",'protected_branches':[%.*s]}"),
                           (int)b.len, (const char *)b.p);
            EXPECT_VALID(doc);
        }
    }
    (void)snprintf(doc, sizeof(doc), DOC_GIT("{" GIT_OK ",'protected_branches':[%.*s]}"),
                   (int)b.len, (const char *)b.p);
    EXPECT(doc, "$.clients[0].git.protected_branches: too many protected branches (33; at "
                "most 32)");
    sl_buf_finish(&b);
}

static void a_git_client_still_needs_an_identity(void **state)
{
    (void)state;
    EXPECT("{'version':1,'environments':{'e':{'default':'deny'}},'clients':[{'id':'sb',"
           "'environment':'e','git':{" GIT_OK "}}]}",
           "$.clients[0]: a client needs at least one of \"token\", \"ip\" and \"cidr\"");
}

/*
 * The path matcher.
 */

static enum sl_git_path path_of(const char *base, const char *repo, const char *target)
{
    return sl_git_path_of(sl_slice_str(base), sl_slice_str(repo), sl_slice_str(target));
}

static void matches_the_own_paths_literally(void **state)
{
    static const struct {
        const char *base;
        const char *target;
        enum sl_git_path want;
    } rows[] = {
        { "", "/acme/site/info/refs?service=git-upload-pack", SL_GIT_PATH_INFO_REFS_UPLOAD },
        { "", "/acme/site.git/info/refs?service=git-upload-pack", SL_GIT_PATH_INFO_REFS_UPLOAD },
        { "", "/acme/site.git/info/refs?service=git-receive-pack", SL_GIT_PATH_INFO_REFS_RECEIVE },
        { "", "/acme/site/git-upload-pack", SL_GIT_PATH_UPLOAD_PACK },
        { "", "/acme/site.git/git-receive-pack", SL_GIT_PATH_RECEIVE_PACK },
        { "", "/acme/site.git/info/lfs/objects/batch", SL_GIT_PATH_LFS_BATCH },
        { "", "/acme/site/info/lfs/objects/batch?x=1", SL_GIT_PATH_LFS_BATCH },
        { "", "/acme/site.git/info/lfs/objects/0123", SL_GIT_PATH_LFS },
        { "", "/acme/site.git/info/lfs/locks?path=a&limit=1", SL_GIT_PATH_LFS },
        { "", "/acme/site.git/info/lfs/locks/1/unlock", SL_GIT_PATH_LFS },
        { "/git", "/git/acme/site.git/git-upload-pack", SL_GIT_PATH_UPLOAD_PACK },
        { "/a/b", "/a/b/acme/site/info/refs?service=git-receive-pack",
          SL_GIT_PATH_INFO_REFS_RECEIVE },
        /* Not the base path. */
        { "/git", "/acme/site.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "/git", "/gitx/acme/site.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "/git", "/GIT/acme/site.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/git/acme/site.git/git-upload-pack", SL_GIT_PATH_NONE },
        /* Another repository, a prefix of it, a longer one, another case. */
        { "", "/acme/other.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/sitex.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/sit.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/site/x.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/site.git.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/site.gitx/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/ACME/site.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/x/acme/site.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "acme/site.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "", SL_GIT_PATH_NONE },
        { "", "/", SL_GIT_PATH_NONE },
        { "", "/acme/site", SL_GIT_PATH_NONE },
        { "", "/acme/site.git", SL_GIT_PATH_NONE },
        /* Other endpoints of the repository. */
        { "", "/acme/site.git/info/refs", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/HEAD", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/objects/info/packs", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/info/lfs", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/info/lfsx/objects/batch", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/git-upload-packs", SL_GIT_PATH_NONE },
        /* Queries: exactly the service on info/refs, none on the services. */
        { "", "/acme/site.git/info/refs?service=git-upload-pack&x", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/info/refs?x&service=git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/info/refs?service=git-upload-archive", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/info/refs?", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/git-upload-pack?", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/git-receive-pack?x=1", SL_GIT_PATH_NONE },
        /* Spellings a server may decode or normalise into the repository. */
        { "", "/acme/%73ite.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/git%2Dupload-pack", SL_GIT_PATH_NONE },
        { "", "/acme%2Fsite.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/site/../site.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/other/../site.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/info/lfs/../../../other.git/info/lfs/objects/batch",
          SL_GIT_PATH_NONE },
        { "", "/acme/site.git/info/lfs/objects/%2e%2e/x", SL_GIT_PATH_NONE },
        { "", "/acme/./site.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "//acme/site.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme//site.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/site.git//git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/info/lfs/objects/", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/info/lfs/objects//batch", SL_GIT_PATH_NONE },
        { "", "/acme/site;x=1/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/..;/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme\\site.git/git-upload-pack", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/git-upload-pack#x", SL_GIT_PATH_NONE },
        { "", "/acme/site.git/info/lfs/objects/a b", SL_GIT_PATH_NONE },
        /* A '?' ends the path: what follows is the query, whatever it holds. */
        { "", "/acme/site.git/info/lfs/objects/batch?../../x", SL_GIT_PATH_LFS_BATCH },
    };

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(rows); i++) {
        enum sl_git_path got = path_of(rows[i].base, "acme/site", rows[i].target);

        if (got != rows[i].want) {
            fail_msg("row %zu: base '%s' target '%s': got %s, want %s", i, rows[i].base,
                     rows[i].target, sl_git_path_name(got), sl_git_path_name(rows[i].want));
        }
    }
    /* A repository of more segments, and one of one. */
    assert_int_equal(path_of("", "a/b/c", "/a/b/c.git/git-upload-pack"), SL_GIT_PATH_UPLOAD_PACK);
    assert_int_equal(path_of("", "a/b/c", "/a/b.git/git-upload-pack"), SL_GIT_PATH_NONE);
    assert_int_equal(path_of("", "site", "/site/git-upload-pack"), SL_GIT_PATH_UPLOAD_PACK);
    assert_int_equal(path_of("", "", "/git-upload-pack"), SL_GIT_PATH_NONE);
    /* NUL bytes in the target are refused, not a terminator. */
    assert_int_equal(sl_git_path_of(sl_slice_str(""), sl_slice_str("acme/site"),
                                    sl_slice_of("/acme/site/git-upload-pack\0x", 28)),
                     SL_GIT_PATH_NONE);
}

static void names_the_paths(void **state)
{
    (void)state;
    for (int p = SL_GIT_PATH_NONE; p <= SL_GIT_PATH_LFS_BATCH; p++) {
        assert_string_not_equal(sl_git_path_name((enum sl_git_path)p), "unknown");
    }
}

/*
 * Protected branches.
 */

static bool protected_ref(const char *ref)
{
    static const struct sl_slice globs[] = {
        { (const uint8_t *)"release/*", 9 },
        { (const uint8_t *)"*-stable", 8 },
        { (const uint8_t *)"hot*fix*", 8 },
    };

    return sl_git_ref_matches(sl_slice_str(ref), sl_slice_str("main"), globs, SL_ARRAY_LEN(globs));
}

static void tells_protected_refs(void **state)
{
    static const char *const yes[] = {
        "refs/heads/main",      "refs/heads/MAIN",        "REFS/Heads/Main",
        "refs/heads/release/1", "refs/heads/release/1/2", "refs/heads/release/",
        "refs/heads/v1-stable", "refs/heads/-stable",     "refs/heads/a/b-stable",
        "refs/heads/hotfix",    "refs/heads/hot-xfix-y",  "refs/heads/RELEASE/x",
    };
    static const char *const no[] = {
        "refs/heads/mainx",
        "refs/heads/xmain",
        "refs/heads/release",
        "refs/heads/releases/1",
        "refs/tags/main",
        "refs/heads/main/x",
        "refs/heads/",
        "refs/heads",
        "main",
        "refs/remotes/o/main",
        "refs/heads/stable",
        "refs/heads/ho",
        "",
        "refs/heads/v1-stablex",
        "refs/for/main",
        "refs/heads//main",
    };

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(yes); i++) {
        if (!protected_ref(yes[i])) {
            fail_msg("%s should be protected", yes[i]);
        }
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(no); i++) {
        if (protected_ref(no[i])) {
            fail_msg("%s should not be protected", no[i]);
        }
    }
    /* '*' alone protects every branch, and nothing else. */
    {
        const struct sl_slice star = { (const uint8_t *)"*", 1 };

        assert_true(
                sl_git_ref_matches(sl_slice_str("refs/heads/x/y"), sl_slice_str("main"), &star, 1));
        assert_false(
                sl_git_ref_matches(sl_slice_str("refs/tags/x"), sl_slice_str("main"), &star, 1));
    }
}

static void judges_refs_through_the_snapshot(void **state)
{
    struct sl_snapshot *s = parse(DOC_GIT("{" GIT_OK ",'protected_branches':['release/*']}"), NULL);
    const struct sl_git *g = sl_client_git(sl_snapshot_find_client(s, "sb"));

    (void)state;
    assert_true(sl_git_ref_is_protected(g, sl_slice_str("refs/heads/main")));
    assert_true(sl_git_ref_is_protected(g, sl_slice_str("refs/heads/release/2")));
    assert_false(sl_git_ref_is_protected(g, sl_slice_str("refs/heads/feature-x")));
    sl_snapshot_unref(s);
}

/*
 * The decision on the git host.
 */

static const char decide_policy[] =
        "{'version':1,'environments':{"
        "  'e':{'default':'deny','rules':["
        "    {'host':'git.example.test:8443','credential':{'header':'Authorization',"
        "     'value':'Bearer rule'}},"
        "    {'host':'api.example.test','credential':{'header':'X-Key','value':'k'}},"
        "    {'host':'ro.example.test','methods':['GET']} ]},"
        "  'open':{'default':'allow'}},"
        "'clients':["
        "  {'id':'w','ip':'10.0.0.1','environment':'e','git':{" GIT_OK ",'base_path':'/git'}},"
        "  {'id':'r','ip':'10.0.0.2','environment':'e','git':{'host':'git.example.test:8443',"
        "   'repo':'acme/site','access':'read','credential':{'header':'Authorization',"
        "   'value':'Basic cmVhZA=='},'default_branch':'main'}},"
        "  {'id':'none','ip':'10.0.0.3','environment':'e'},"
        "  {'id':'o','ip':'10.0.0.4','environment':'open','git':{'host':'ro.example.test',"
        "   'repo':'a/b','access':'write','credential':{'header':'Authorization',"
        "   'value':'Basic b3Blbg=='},'default_branch':'main'}}"
        "]}";

struct decide_row {
    const char *client;
    const char *host;
    uint16_t port;
    const char *method;
    bool tls;
    const char *target;
    enum sl_reason reason;
    /* NULL: no credential. */
    const char *credential;
    bool git_credential;
    bool push;
};

static void decides_on_the_git_host(void **state)
{
    static const struct decide_row rows[] = {
        /* Own paths: the git credential, never the rule's. */
        { "w", "git.example.test", 8443, "GET", true,
          "/git/acme/site.git/info/refs?service=git-upload-pack", SL_REASON_NONE, "Basic Z2l0",
          true, false },
        { "w", "git.example.test", 8443, "POST", true, "/git/acme/site/git-upload-pack",
          SL_REASON_NONE, "Basic Z2l0", true, false },
        { "w", "git.example.test", 8443, "GET", true,
          "/git/acme/site/info/refs?service=git-receive-pack", SL_REASON_NONE, "Basic Z2l0", true,
          false },
        { "w", "git.example.test", 8443, "POST", true, "/git/acme/site.git/git-receive-pack",
          SL_REASON_NONE, "Basic Z2l0", true, true },
        { "w", "git.example.test", 8443, "PUT", true, "/git/acme/site.git/info/lfs/objects/1",
          SL_REASON_NONE, "Basic Z2l0", true, false },
        { "w", "git.example.test", 8443, "DELETE", true, "/git/acme/site.git/info/lfs/locks/1",
          SL_REASON_NONE, "Basic Z2l0", true, false },
        /* Elsewhere on the git host: allowed, no credential at all. */
        { "w", "git.example.test", 8443, "GET", true,
          "/git/acme/other.git/info/refs?service=git-upload-pack", SL_REASON_NONE, NULL, false,
          false },
        { "w", "git.example.test", 8443, "GET", true, "/", SL_REASON_NONE, NULL, false, false },
        { "w", "git.example.test", 8443, "GET", true, "/git/acme/%73ite/git-upload-pack",
          SL_REASON_NONE, NULL, false, false },
        /* The path, but a method it does not take: no credential. */
        { "w", "git.example.test", 8443, "POST", true,
          "/git/acme/site.git/info/refs?service=git-upload-pack", SL_REASON_NONE, NULL, false,
          false },
        { "w", "git.example.test", 8443, "GET", true, "/git/acme/site.git/git-receive-pack",
          SL_REASON_NONE, NULL, false, false },
        { "w", "git.example.test", 8443, "PUT", true, "/git/acme/site.git/git-upload-pack",
          SL_REASON_NONE, NULL, false, false },
        /* TRACE on an own path whatever it takes; plain HTTP on one. */
        { "w", "git.example.test", 8443, "TRACE", true, "/git/acme/site.git/git-upload-pack",
          SL_REASON_METHOD_NOT_ALLOWED, NULL, false, false },
        { "w", "git.example.test", 8443, "TRACE", true, "/git/acme/site.git/info/lfs/x",
          SL_REASON_METHOD_NOT_ALLOWED, NULL, false, false },
        { "w", "git.example.test", 8443, "TRACE", true, "/git/acme/other.git/git-upload-pack",
          SL_REASON_NONE, NULL, false, false },
        { "w", "git.example.test", 8443, "POST", false, "/git/acme/site.git/git-upload-pack",
          SL_REASON_CREDENTIAL_NEEDS_TLS, NULL, false, false },
        { "w", "git.example.test", 8443, "GET", false, "/git/acme/other/x", SL_REASON_NONE, NULL,
          false, false },
        /* Without a target (a relay decided again): no git credential. */
        { "w", "git.example.test", 8443, "GET", true, NULL, SL_REASON_NONE, NULL, false, false },
        /* Another port or host: the rules as ever. */
        { "w", "git.example.test", 443, "GET", true, "/git/acme/site.git/git-upload-pack",
          SL_REASON_PORT_NOT_ALLOWED, NULL, false, false },
        { "w", "api.example.test", 443, "GET", true, "/git/acme/site.git/git-upload-pack",
          SL_REASON_NONE, "k", false, false },
        /* Read access. */
        { "r", "git.example.test", 8443, "GET", true,
          "/acme/site.git/info/refs?service=git-upload-pack", SL_REASON_NONE,
          "Basic cmVhZA==", true, false },
        { "r", "git.example.test", 8443, "POST", true, "/acme/site.git/git-upload-pack",
          SL_REASON_NONE, "Basic cmVhZA==", true, false },
        { "r", "git.example.test", 8443, "GET", true,
          "/acme/site.git/info/refs?service=git-receive-pack", SL_REASON_GIT_READ_ONLY, NULL, false,
          false },
        { "r", "git.example.test", 8443, "POST", true, "/acme/site.git/git-receive-pack",
          SL_REASON_GIT_READ_ONLY, NULL, false, false },
        { "r", "git.example.test", 8443, "POST", true, "/acme/site.git/info/lfs/objects/batch",
          SL_REASON_NONE, "Basic cmVhZA==", true, false },
        { "r", "git.example.test", 8443, "GET", true, "/acme/site.git/info/lfs/objects/1",
          SL_REASON_NONE, "Basic cmVhZA==", true, false },
        { "r", "git.example.test", 8443, "HEAD", true, "/acme/site.git/info/lfs/objects/1",
          SL_REASON_NONE, "Basic cmVhZA==", true, false },
        { "r", "git.example.test", 8443, "PUT", true, "/acme/site.git/info/lfs/objects/1",
          SL_REASON_GIT_READ_ONLY, NULL, false, false },
        { "r", "git.example.test", 8443, "POST", true, "/acme/site.git/info/lfs/locks",
          SL_REASON_GIT_READ_ONLY, NULL, false, false },
        { "r", "git.example.test", 8443, "PUT", true, "/acme/site.git/info/lfs/objects/batch",
          SL_REASON_GIT_READ_ONLY, NULL, false, false },
        { "r", "git.example.test", 8443, "HEAD", true,
          "/acme/site.git/info/refs?service=git-receive-pack", SL_REASON_NONE, NULL, false, false },
        /* No git object: the rule's credential, on every path. */
        { "none", "git.example.test", 8443, "GET", true,
          "/acme/site.git/info/refs?service=git-upload-pack", SL_REASON_NONE, "Bearer rule", false,
          false },
        /* A default-allow environment: the git object applies with no rule at all; the rule's
         * method filter still decides first. */
        { "o", "ro.example.test", 443, "POST", true, "/a/b/git-receive-pack", SL_REASON_NONE,
          "Basic b3Blbg==", true, true },
        { "o", "ro.example.test", 443, "GET", true, "/x", SL_REASON_NONE, NULL, false, false },
        { "w", "ro.example.test", 443, "POST", true, "/a/b/git-receive-pack",
          SL_REASON_METHOD_NOT_ALLOWED, NULL, false, false },
    };
    struct sl_snapshot *s = parse(decide_policy, NULL);

    (void)state;
    assert_non_null(s);
    for (size_t i = 0; i < SL_ARRAY_LEN(rows); i++) {
        const struct decide_row *r = &rows[i];
        struct sl_host h;
        struct sl_request_view req;
        struct sl_decision d;

        assert_int_equal(sl_host_normalize(sl_slice_str(r->host), 0, &h, NULL), 0);
        req = (struct sl_request_view){ &h, r->port, r->method, r->tls, r->target };
        sl_policy_decide(s, sl_snapshot_find_client(s, r->client), &req, NOW, &d);
        if (d.reason != r->reason || d.allow != (r->reason == SL_REASON_NONE)
            || (d.credential_value == NULL) != (r->credential == NULL)
            || (r->credential != NULL && strcmp(d.credential_value, r->credential) != 0)
            || d.git_credential != r->git_credential || (d.git_push != NULL) != r->push) {
            fail_msg("row %zu (%s %s %s:%u%s): got %s cred=%s git=%d push=%d", i, r->client,
                     r->method, r->host, (unsigned)r->port, r->target != NULL ? r->target : "",
                     sl_reason_code(d.reason),
                     d.credential_value != NULL ? d.credential_value : "-", d.git_credential,
                     d.git_push != NULL);
        }
    }
    sl_snapshot_unref(s);
}

static void hints_at_git_refusals(void **state)
{
    struct sl_snapshot *s = parse(decide_policy, NULL);
    struct sl_host h;
    struct sl_request_view req;
    struct sl_decision d;
    char hint[SL_POLICY_HINT_MAX];

    (void)state;
    assert_int_equal(sl_host_normalize(sl_slice_str("git.example.test"), 0, &h, NULL), 0);
    req = (struct sl_request_view){ &h, 8443, "TRACE", true, "/git/acme/site/git-upload-pack" };
    sl_policy_decide(s, sl_snapshot_find_client(s, "w"), &req, NOW, &d);
    assert_true(sl_policy_hint(&d, &req, hint, sizeof(hint)) > 0);
    assert_string_equal(hint, "TRACE is never allowed on the paths of the client's git "
                              "repository (it would echo the credential)");
    req = (struct sl_request_view){ &h, 8443, "POST", true, "/acme/site/git-receive-pack" };
    sl_policy_decide(s, sl_snapshot_find_client(s, "r"), &req, NOW, &d);
    assert_int_equal(d.reason, SL_REASON_GIT_READ_ONLY);
    assert_int_equal(sl_policy_hint(&d, &req, hint, sizeof(hint)), 0);
    sl_snapshot_unref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts_a_full_git_object),
        cmocka_unit_test(reports_every_field_with_its_path),
        cmocka_unit_test(validates_repository_paths),
        cmocka_unit_test(validates_base_paths),
        cmocka_unit_test(validates_branch_names_and_globs),
        cmocka_unit_test(caps_the_protected_list),
        cmocka_unit_test(a_git_client_still_needs_an_identity),
        cmocka_unit_test(matches_the_own_paths_literally),
        cmocka_unit_test(names_the_paths),
        cmocka_unit_test(tells_protected_refs),
        cmocka_unit_test(judges_refs_through_the_snapshot),
        cmocka_unit_test(decides_on_the_git_host),
        cmocka_unit_test(hints_at_git_refusals),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
