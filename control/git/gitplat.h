/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/git/gitplat.h - the git platform as the control plane sees it (docs/git-platform.md):
 * a repository's metadata (visibility, default branch, protected branches, archived), a user's
 * role in it, the credential a sandbox's git requests carry and its revocation, and the checks
 * a sandbox's repository and ref get.
 *
 * One interface, one implementation today (control/git/gitlocal.h: repositories and roles in
 * sluice's own store, the smart-HTTP server at `--git-url` reached with the operator's
 * `--git-token`). An adapter for GitHub, GitLab or Gitea fills another struct sl_gitplat_ops
 * (docs/git-platform.md says what each operation promises); the sandbox manager, the API's
 * checks, the jobs and the snapshot's per-sandbox git access call only what is declared here.
 *
 * Threads: the operations marked "blocking" may wait on a database or a network and run on the
 * thread pool only (API jobs, snapshot builds); `revoke` never blocks and runs on the loop; the
 * pure helpers run anywhere. An implementation is safe to call from several threads at once.
 *
 * Lifecycle: an implementation's constructor -> operations -> gp->ops->destroy(gp), once nothing
 * calls it any more.
 */
#ifndef SL_CONTROL_GIT_GITPLAT_H
#define SL_CONTROL_GIT_GITPLAT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "control/store/model.h"

/* Bounds of a repository's metadata (the snapshot's `git` object has the same). */
#define SL_GIT_PROTECTED_MAX 32
#define SL_GIT_BRANCH_MAX    255

/* What a sandbox's git may do in its repository (the snapshot's `git.access`). */
enum sl_git_access {
    SL_GIT_ACCESS_NONE = 0,
    SL_GIT_ACCESS_READ,
    SL_GIT_ACCESS_WRITE,
};

/* "read", "write" ("none" for NONE). */
const char *sl_git_access_name(enum sl_git_access access);

/* A repository as the platform describes it. Strings owned; sl_gitplat_repo_finish(). */
struct sl_gitplat_repo {
    /* `owner/name`. */
    char *name;
    bool is_public;
    char *default_branch;
    /* Globs over branch names (`release-*`, and `*` matches `/` too), at most
     * SL_GIT_PROTECTED_MAX. */
    char **protected_branches;
    size_t n_protected;
    /* Read-only: no sandbox may be created or used, git access is read. */
    bool archived;
};

/* Frees the owned members and zeroes the repository. A zeroed one is fine. */
void sl_gitplat_repo_finish(struct sl_gitplat_repo *r);

/* The credential the proxy puts on a sandbox's requests to its own repository. Strings owned;
 * sl_gitplat_credential_finish() wipes and frees them. */
struct sl_gitplat_credential {
    /* The header (`Authorization`) and its whole value (`Basic ...`). */
    char *header;
    char *value;
    /* Texts that must never appear in a command's output (the value and what it is made of),
     * replaced by `***` there; `n_redact` of them. */
    char *redact[3];
    size_t n_redact;
};

void sl_gitplat_credential_finish(struct sl_gitplat_credential *c);

/* Where sandboxes clone from: `--git-url` taken apart. Fixed once set. */
struct sl_gitplat_remote {
    /* `https://HOST[:PORT][/BASE]`, no trailing slash: repositories are URL/OWNER/NAME.git. */
    char *url;
    /* HOST[:PORT] in normal form, the port left out when it is 443: the proxy rule's host. */
    char *host;
    /* `/BASE`, or "" when the URL has no path. */
    char *base_path;
};

struct sl_gitplat;

struct sl_gitplat_ops {
    /* The implementation's name for logs ("local"). */
    const char *name;
    /*
     * Blocking. Fills `*out` with the repository `name` (`owner/name`). Returns 0, SL_ENOTFOUND
     * when the platform has no such repository, SL_EIO when its record is damaged (logged,
     * naming the repository; callers fail closed), SL_ENOMEM.
     */
    int (*repo)(struct sl_gitplat *gp, const char *name, struct sl_gitplat_repo *out);
    /*
     * Blocking. The role of the user `user_id` in the repository `name`, every rule applied: a
     * disabled or unknown user and an unknown repository have NONE; a global admin acting as
     * one (`as_admin`: a token of scope admin, or a sandbox they created) has ADMIN everywhere;
     * a public repository gives everyone at least READ. Returns 0 or an error.
     */
    int (*role)(struct sl_gitplat *gp, const char *name, const char *user_id, bool as_admin,
                enum sl_repo_role *out);
    /*
     * Blocking. The credential of a new sandbox of `user_id` in the repository `name`, with git
     * access `access` (READ or WRITE) at most. Called once per sandbox, before it starts; the
     * proxy uses it on that repository's paths only (docs/reference/snapshot.md §3 `git`), for
     * as long as the sandbox lives and its user keeps access. Returns 0, SL_ENOTFOUND when the
     * platform has no remote (sandboxes get no repository), or an error.
     */
    int (*credential)(struct sl_gitplat *gp, const char *name, const char *user_id,
                      enum sl_git_access access, struct sl_gitplat_credential *out);
    /*
     * Never blocks (an implementation that must call out queues the call). The sandbox that got
     * `c` is gone: what credential() issued for it may stop working now. Its snapshot entry is
     * gone too, so nothing of sluice's uses it any more.
     */
    void (*revoke)(struct sl_gitplat *gp, const struct sl_gitplat_credential *c);
    /* Frees the implementation. */
    void (*destroy)(struct sl_gitplat *gp);
};

struct sl_gitplat {
    const struct sl_gitplat_ops *ops;
    /* NULL when sandboxes get no repository (no `--git-url`). */
    const struct sl_gitplat_remote *remote;
};

/* ---- what a caller may do, decided over the operations ---- */

/* The answer of sl_gitplat_may_use(). */
struct sl_gitplat_verdict {
    /* 0 when allowed; else the HTTP status and message of the refusal (static text). */
    int status;
    const char *message;
    /* The caller's role (also when refused). */
    enum sl_repo_role role;
};

/* What a caller acts with. */
struct sl_gitplat_caller {
    const char *user_id;
    /* A global admin acting as one (see the `role` operation). */
    bool as_admin;
    /* The token may write (scope write or admin). */
    bool token_writes;
};

/*
 * Blocking. May `who` create or use sandboxes (and jobs) in the repository `name`? Fills `*v`:
 * allowed (status 0), or 404 `repository not found` (none, or one the caller cannot see), 403
 * `repository is archived (read-only)`, 403 `write access required` (a role below write, or a
 * read-only token), in that order. Returns 0 (with `*v` filled) or an error of the operations.
 */
SL_MUST_CHECK int sl_gitplat_may_use(struct sl_gitplat *gp, const char *name,
                                     const struct sl_gitplat_caller *who,
                                     struct sl_gitplat_verdict *v);

/* The git access of a sandbox: its user's role when it was created and now, capped at write,
 * and read only while the repository is archived. NONE when the role now is below read. */
enum sl_git_access sl_git_access_of(enum sl_repo_role at_creation, enum sl_repo_role now,
                                    bool archived);

/* ---- pure checks ---- */

/* A repository name as the platform registers one: `owner/name`, two segments of
 * `A-Z a-z 0-9 . _ -` that are neither `.` nor `..`, at most 255 bytes. */
bool sl_git_repo_name_is_valid(const char *name);

/* A ref as a sandbox takes one (the `422 unknown ref` check before anything runs): what
 * `git check-ref-format --allow-onelevel` accepts, or a commit id, and never something git
 * could read as an option: 1-255 bytes; no control character, space or `~^:?*[\`; not starting
 * with `-` or `/`; no `..`, a doubled slash or `@{`; not ending with `/`, `.` or `.lock`; not
 * `@`. Whether the ref exists is found out by the clone. */
bool sl_git_ref_is_valid(const char *ref);

/* A branch name (the default branch): a valid ref of at most SL_GIT_BRANCH_MAX bytes. */
bool sl_git_branch_is_valid(const char *branch);

/* A protected branch glob: as a branch name, with `*` also allowed (any run of characters, `/`
 * included, when the proxy matches it). */
bool sl_git_branch_glob_is_valid(const char *glob);

/*
 * Takes `--git-url` apart into `out` (caller storage, owned strings; sl_git_remote_finish()):
 * an `https://` URL without query or fragment whose path is plain segments (`A-Z a-z 0-9 . _ ~
 * -`, neither `.` nor `..`; the proxy matches the repository's paths literally). Trailing
 * slashes are dropped. Returns 0, SL_EINVAL with the reason in `err`, or SL_ENOMEM.
 */
SL_MUST_CHECK int sl_git_remote_parse(const char *url, struct sl_gitplat_remote *out, char *err,
                                      size_t errlen);

void sl_git_remote_finish(struct sl_gitplat_remote *r);

/* Writes the clone URL of `repo` (`URL/OWNER/NAME.git`) to `out`. SL_ETOOBIG when it does not
 * fit. */
SL_MUST_CHECK int sl_git_clone_url(const struct sl_gitplat_remote *r, const char *repo, char *out,
                                   size_t cap);

#endif
