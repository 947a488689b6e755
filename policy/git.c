/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/git.c - a client's `git` object (docs/reference/snapshot.md §3): its validation, the
 * own-repository path matcher and the protected-branch test.
 *
 * The matcher is deliberately literal. A proxy that decoded or normalised a path before
 * comparing it would have to decode exactly as every git server does; instead a path that is
 * not already in its one plain spelling never matches, so the worst a clever spelling earns is
 * a request without the credential (the server's own 401).
 */
#include "policy/git.h"

#include <string.h>

#include "policy/host.h"
#include "policy/snapshot_int.h"

/* Room for a quoted value in a message. */
#define QUOTED_MAX SL_JPATH_QUOTED_CAP

static const char *const git_keys[] = {
    "host", "base_path", "repo", "access", "credential", "default_branch", "protected_branches",
};

/*
 * The path matcher.
 */

/* An RFC 3986 unreserved character, the only ones a matched path segment may have. */
static bool is_plain(uint8_t ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
           || ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

/* Is `path` plain: '/' then segments of unreserved characters, none empty, "." or ".."? */
static bool path_is_plain(const uint8_t *p, size_t n)
{
    size_t seg = 1;

    if (n == 0 || p[0] != '/') {
        return false;
    }
    for (size_t i = 1; i <= n; i++) {
        if (i == n || p[i] == '/') {
            size_t len = i - seg;

            if (len == 0 || (len == 1 && p[seg] == '.')
                || (len == 2 && p[seg] == '.' && p[seg + 1] == '.')) {
                return false;
            }
            seg = i + 1;
        } else if (!is_plain(p[i])) {
            return false;
        }
    }
    return true;
}

/* Does `s` (`n` bytes) start with the NUL-terminated `prefix`? */
static bool starts_with(const uint8_t *s, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);

    return n >= k && memcmp(s, prefix, k) == 0;
}

static bool equals(const uint8_t *s, size_t n, const char *t)
{
    return n == strlen(t) && memcmp(s, t, n) == 0;
}

enum sl_git_path sl_git_path_of(struct sl_slice base, struct sl_slice repo, struct sl_slice target)
{
    const uint8_t *q = target.n > 0 ? memchr(target.p, '?', target.n) : NULL;
    size_t path_n = q != NULL ? (size_t)(q - target.p) : target.n;
    const uint8_t *query = q != NULL ? q + 1 : NULL;
    size_t query_n = q != NULL ? target.n - path_n - 1 : 0;
    const uint8_t *rest;
    size_t rest_n;

    if (repo.n == 0 || !path_is_plain(target.p, path_n)) {
        return SL_GIT_PATH_NONE;
    }
    /* BASE "/" REPO */
    if (path_n < base.n + 1 + repo.n || (base.n > 0 && memcmp(target.p, base.p, base.n) != 0)
        || target.p[base.n] != '/' || memcmp(target.p + base.n + 1, repo.p, repo.n) != 0) {
        return SL_GIT_PATH_NONE;
    }
    rest = target.p + base.n + 1 + repo.n;
    rest_n = path_n - base.n - 1 - repo.n;
    if (starts_with(rest, rest_n, ".git/")) {
        rest += 4;
        rest_n -= 4;
    }
    if (equals(rest, rest_n, "/info/refs")) {
        if (query != NULL && equals(query, query_n, "service=git-upload-pack")) {
            return SL_GIT_PATH_INFO_REFS_UPLOAD;
        }
        if (query != NULL && equals(query, query_n, "service=git-receive-pack")) {
            return SL_GIT_PATH_INFO_REFS_RECEIVE;
        }
        return SL_GIT_PATH_NONE;
    }
    if (equals(rest, rest_n, "/git-upload-pack")) {
        return query == NULL ? SL_GIT_PATH_UPLOAD_PACK : SL_GIT_PATH_NONE;
    }
    if (equals(rest, rest_n, "/git-receive-pack")) {
        return query == NULL ? SL_GIT_PATH_RECEIVE_PACK : SL_GIT_PATH_NONE;
    }
    if (equals(rest, rest_n, "/info/lfs/objects/batch")) {
        return SL_GIT_PATH_LFS_BATCH;
    }
    /* "/info/lfs/" and at least one more segment (the path has no empty segment). */
    if (starts_with(rest, rest_n, "/info/lfs/")) {
        return SL_GIT_PATH_LFS;
    }
    return SL_GIT_PATH_NONE;
}

const char *sl_git_path_name(enum sl_git_path p)
{
    switch (p) {
    case SL_GIT_PATH_NONE:
        return "none";
    case SL_GIT_PATH_INFO_REFS_UPLOAD:
        return "info/refs (git-upload-pack)";
    case SL_GIT_PATH_INFO_REFS_RECEIVE:
        return "info/refs (git-receive-pack)";
    case SL_GIT_PATH_UPLOAD_PACK:
        return "git-upload-pack";
    case SL_GIT_PATH_RECEIVE_PACK:
        return "git-receive-pack";
    case SL_GIT_PATH_LFS:
        return "Git LFS";
    case SL_GIT_PATH_LFS_BATCH:
        return "Git LFS batch";
    }
    return "unknown";
}

/*
 * Protected branches.
 */

static uint8_t lower(uint8_t ch)
{
    return ch >= 'A' && ch <= 'Z' ? (uint8_t)(ch - 'A' + 'a') : ch;
}

static bool same_ci(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (lower(a[i]) != lower(b[i])) {
            return false;
        }
    }
    return true;
}

/* Does glob `pat` ('*': any run, the empty one too) match all of `s`, ignoring ASCII case? The
 * classic two-cursor walk: on a mismatch, the last '*' takes one more character. At most
 * |pat| x |s| steps. */
static bool glob_ci(const uint8_t *pat, size_t pn, const uint8_t *s, size_t sn)
{
    size_t pi = 0;
    size_t si = 0;
    size_t star = SIZE_MAX;
    size_t mark = 0;

    while (si < sn) {
        if (pi < pn && pat[pi] == '*') {
            star = pi++;
            mark = si;
        } else if (pi < pn && lower(pat[pi]) == lower(s[si])) {
            pi++;
            si++;
        } else if (star != SIZE_MAX) {
            pi = star + 1;
            si = ++mark;
        } else {
            return false;
        }
    }
    while (pi < pn && pat[pi] == '*') {
        pi++;
    }
    return pi == pn;
}

bool sl_git_ref_matches(struct sl_slice ref, struct sl_slice default_branch,
                        const struct sl_slice *globs, size_t n_globs)
{
    static const char heads[] = "refs/heads/";
    const size_t k = sizeof(heads) - 1;
    const uint8_t *branch;
    size_t bn;

    if (ref.n <= k || !same_ci(ref.p, (const uint8_t *)heads, k)) {
        return false;
    }
    branch = ref.p + k;
    bn = ref.n - k;
    if (bn == default_branch.n && same_ci(branch, default_branch.p, bn)) {
        return true;
    }
    for (size_t i = 0; i < n_globs; i++) {
        if (glob_ci(globs[i].p, globs[i].n, branch, bn)) {
            return true;
        }
    }
    return false;
}

bool sl_git_ref_is_protected(const struct sl_git *g, struct sl_slice ref)
{
    return sl_git_ref_matches(ref, sl_slice_of(g->default_branch, g->default_branch_len),
                              g->protected, g->n_protected);
}

const char *sl_git_repo(const struct sl_git *g)
{
    return g->repo;
}

bool sl_git_can_write(const struct sl_git *g)
{
    return g->write;
}

const char *sl_git_default_branch(const struct sl_git *g)
{
    return g->default_branch;
}

size_t sl_git_protected_count(const struct sl_git *g)
{
    return g->n_protected;
}

const char *sl_git_protected(const struct sl_git *g, size_t i)
{
    return (const char *)g->protected[i].p;
}

/*
 * Validation.
 */

static char *keep(struct sl__parse *p, const char *s, size_t n)
{
    char *d = sl_arena_strndup(&p->s->arena, s, n);

    if (d == NULL) {
        p->rc = SL_ENOMEM;
    }
    return d;
}

static void parse_git_host(struct sl__parse *p, const char *s, size_t n, struct sl_git *g)
{
    char quoted[QUOTED_MAX];
    const char *why = "";

    if (sl_host_parse_authority(sl_slice_of(s, n), 0, &g->host, &g->port, &why) != 0) {
        sl__quote(quoted, sizeof(quoted), s, n);
        sl__error(p, "bad host %s: %s", quoted, why);
        return;
    }
    if (g->port == 0) {
        g->port = 443;
    }
}

/* "" or "/seg[/seg...]": segments of unreserved characters, none "." or "..". */
static void parse_base_path(struct sl__parse *p, const char *s, size_t n, struct sl_git *g)
{
    if (n > SL_GIT_PATH_MAX || (n > 0 && !path_is_plain((const uint8_t *)s, n))) {
        sl__error(p,
                  "must be \"\" or a path like \"/git\": at most %d bytes, segments of "
                  "A-Z a-z 0-9 - . _ ~ (not \".\" or \"..\"), no trailing '/'",
                  SL_GIT_PATH_MAX);
        return;
    }
    g->base_path = keep(p, s, n);
    g->base_len = (uint32_t)n;
}

static bool is_repo_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
           || ch == '.' || ch == '_' || ch == '-';
}

/* 1-8 segments of [A-Za-z0-9._-]+, none "." or "..". */
static void parse_repo(struct sl__parse *p, const char *s, size_t n, struct sl_git *g)
{
    char quoted[QUOTED_MAX];
    bool ok = n >= 1 && n <= SL_GIT_PATH_MAX;
    size_t segments = 0;
    size_t seg = 0;

    for (size_t i = 0; i <= n && ok; i++) {
        if (i == n || s[i] == '/') {
            size_t len = i - seg;

            ok = len > 0 && !(len == 1 && s[seg] == '.')
                 && !(len == 2 && s[seg] == '.' && s[seg + 1] == '.');
            segments++;
            seg = i + 1;
        } else {
            ok = is_repo_char(s[i]);
        }
    }
    if (!ok || segments > SL_GIT_REPO_SEGMENTS_MAX) {
        sl__quote(quoted, sizeof(quoted), s, n);
        sl__error(p,
                  "%s is not a repository path (\"owner/name\": 1-%d segments of A-Z a-z 0-9 . "
                  "_ -, none \".\" or \"..\", at most %d bytes)",
                  quoted, SL_GIT_REPO_SEGMENTS_MAX, SL_GIT_PATH_MAX);
        return;
    }
    g->repo = keep(p, s, n);
    g->repo_len = (uint32_t)n;
}

static void parse_access(struct sl__parse *p, const char *s, size_t n, struct sl_git *g)
{
    (void)n;
    if (strcmp(s, "write") == 0) {
        g->write = true;
    } else if (strcmp(s, "read") != 0) {
        sl__error(p, "must be \"read\" or \"write\"");
    }
}

/*
 * A branch name as a person writes it (`main`, `release/1.2`), or a glob over them when `glob`:
 * what git's check-ref-format refuses is refused here too, so that a name that can never match a
 * real branch is a typo reported, not a protection silently missing. Returns the phrase of the
 * first fault, or NULL.
 */
static const char *branch_fault(const char *s, size_t n, bool glob)
{
    size_t seg = 0;

    if (n < 1 || n > SL_GIT_BRANCH_MAX) {
        return "must be 1-255 bytes";
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch < 0x21 || ch == 0x7f || strchr("~^:?[\\", ch) != NULL || (ch == '*' && !glob)) {
            return glob ? "has a character a branch name cannot have (space, control, ~ ^ : ? [ "
                          "\\)"
                        : "has a character a branch name cannot have (space, control, ~ ^ : ? "
                          "* [ \\)";
        }
        if (ch == '.' && i + 1 < n && s[i + 1] == '.') {
            return "has \"..\"";
        }
        if (ch == '@' && i + 1 < n && s[i + 1] == '{') {
            return "has \"@{\"";
        }
    }
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '/') {
            size_t len = i - seg;

            if (len == 0) {
                return "has an empty part (a leading, trailing or double '/')";
            }
            if (s[seg] == '.') {
                return "has a part that starts with '.'";
            }
            if (len >= 5 && memcmp(s + i - 5, ".lock", 5) == 0) {
                return "has a part that ends with \".lock\"";
            }
            seg = i + 1;
        }
    }
    if (s[n - 1] == '.') {
        return "ends with '.'";
    }
    if (s[0] == '-') {
        return "starts with '-'";
    }
    return NULL;
}

static void parse_default_branch(struct sl__parse *p, const char *s, size_t n, struct sl_git *g)
{
    char quoted[QUOTED_MAX];
    const char *why = branch_fault(s, n, false);

    if (why != NULL) {
        sl__quote(quoted, sizeof(quoted), s, n);
        sl__error(p, "%s is not a branch name: it %s", quoted, why);
        return;
    }
    g->default_branch = keep(p, s, n);
    g->default_branch_len = (uint32_t)n;
}

static void parse_protected(struct sl__parse *p, json_t *json, struct sl_git *g)
{
    size_t n = json_array_size(json);
    struct sl_slice *list;
    char quoted[QUOTED_MAX];
    size_t mark;

    if (json == NULL) {
        return;
    }
    mark = sl__path_key(p, "protected_branches");
    if (!json_is_array(json)) {
        sl__error(p, "must be an array of branch globs (like \"release/*\")");
    } else if (n > SL_GIT_PROTECTED_MAX) {
        sl__error(p, "too many protected branches (%zu; at most %d)", n, SL_GIT_PROTECTED_MAX);
    } else if (n > 0 && (list = sl_arena_alloc(&p->s->arena, n * sizeof(*list))) == NULL) {
        p->rc = SL_ENOMEM;
    } else {
        for (size_t i = 0; i < n && p->rc == 0; i++) {
            json_t *v = json_array_get(json, i);
            const char *s = json_string_value(v);
            size_t len = json_string_length(v);
            size_t m = sl__path_index(p, i);
            const char *why = NULL;

            list[i] = sl_slice_of(NULL, 0);
            if (!json_is_string(v)) {
                sl__error(p, "must be a string");
            } else if (strlen(s) != len) {
                sl__error(p, "must not contain NUL characters");
            } else if ((why = branch_fault(s, len, true)) != NULL) {
                sl__quote(quoted, sizeof(quoted), s, len);
                sl__error(p, "%s is not a branch glob: it %s", quoted, why);
            } else {
                list[i] = sl_slice_of(keep(p, s, len), len);
            }
            sl__path_pop(p, m);
        }
        g->protected = n > 0 ? list : NULL;
        g->n_protected = (uint32_t)n;
    }
    sl__path_pop(p, mark);
}

typedef void git_field_fn(struct sl__parse *p, const char *s, size_t n, struct sl_git *g);

/* Runs `fn` on the string member `key` of `json`, if present, with the path pointing at it. */
static void with_field(struct sl__parse *p, json_t *json, const char *key, bool required,
                       git_field_fn *fn, struct sl_git *g)
{
    size_t n = 0;
    const char *s = sl__get_string(p, json, key, required, &n);

    if (s != NULL) {
        size_t mark = sl__path_key(p, key);

        fn(p, s, n, g);
        sl__path_pop(p, mark);
    }
}

void sl__parse_git(struct sl__parse *p, json_t *json, struct sl_client *c)
{
    struct sl_git *g;
    json_t *credential;
    size_t mark;

    if (json == NULL) {
        return;
    }
    mark = sl__path_key(p, "git");
    if (!json_is_object(json)) {
        sl__error(p, "must be an object (host, repo, access, credential, default_branch, ...)");
        sl__path_pop(p, mark);
        return;
    }
    g = sl_arena_alloc(&p->s->arena, sizeof(*g));
    if (g == NULL) {
        p->rc = SL_ENOMEM;
        sl__path_pop(p, mark);
        return;
    }
    memset(g, 0, sizeof(*g));
    g->base_path = "";
    sl__check_keys(p, json, git_keys, SL_ARRAY_LEN(git_keys));
    with_field(p, json, "host", true, parse_git_host, g);
    with_field(p, json, "base_path", false, parse_base_path, g);
    with_field(p, json, "repo", true, parse_repo, g);
    with_field(p, json, "access", true, parse_access, g);
    credential = json_object_get(json, "credential");
    if (credential == NULL) {
        size_t m = sl__path_key(p, "credential");

        sl__error(p, "required field missing");
        sl__path_pop(p, m);
    } else {
        g->credential = sl__parse_credential(p, credential);
    }
    with_field(p, json, "default_branch", true, parse_default_branch, g);
    parse_protected(p, json_object_get(json, "protected_branches"), g);
    sl__path_pop(p, mark);
    if (p->rc == 0 && g->repo != NULL && g->credential != NULL && g->default_branch != NULL
        && g->host.len > 0) {
        c->git = g;
        p->s->n_credentials++;
    }
}
