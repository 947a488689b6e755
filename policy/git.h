/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/git.h - a client's git access (docs/reference/snapshot.md §3 `git`): which paths of
 * its git host are its own repository's smart-HTTP and Git LFS endpoints, the only ones that
 * get the git credential, and which branches a push may not update.
 *
 * A `struct sl_git` belongs to the snapshot that parsed it (policy/snapshot.h): immutable,
 * valid for as long as the caller holds a reference to that snapshot, readable from any
 * thread. sl_policy_decide() (policy/decision.h) applies it to a request; the proxy reads a
 * held push's ref-update commands and asks sl_git_ref_is_protected() about each.
 *
 * Everything here parses hostile bytes (request targets, ref names): bounded, allocation-free,
 * never reads past the lengths given, and accepts NUL bytes in the input (to refuse them).
 */
#ifndef SL_POLICY_GIT_H
#define SL_POLICY_GIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/slice.h"

/* Limits of docs/reference/snapshot.md §3 `git`. */
#define SL_GIT_REPO_SEGMENTS_MAX 8
#define SL_GIT_PATH_MAX          255
#define SL_GIT_BRANCH_MAX        255
#define SL_GIT_PROTECTED_MAX     32

/* The message every ref of a refused push gets, and the body of the refusal. */
#define SL_GIT_PROTECTED_MESSAGE \
    "agents may not push to protected or default branches; open a pull request"

struct sl_git; /* opaque, owned by its snapshot */

/*
 * What a request target is for the repository BASE/REPO, judged on the target alone (the method
 * is the decision's business, policy/decision.h):
 *
 *   BASE/REPO[.git]/info/refs?service=git-upload-pack    SL_GIT_PATH_INFO_REFS_UPLOAD
 *   BASE/REPO[.git]/info/refs?service=git-receive-pack   SL_GIT_PATH_INFO_REFS_RECEIVE
 *   BASE/REPO[.git]/git-upload-pack                      SL_GIT_PATH_UPLOAD_PACK
 *   BASE/REPO[.git]/git-receive-pack                     SL_GIT_PATH_RECEIVE_PACK
 *   BASE/REPO[.git]/info/lfs/objects/batch               SL_GIT_PATH_LFS_BATCH
 *   BASE/REPO[.git]/info/lfs/ANYTHING                    SL_GIT_PATH_LFS
 *
 * The path (the target up to its first '?') is matched literally and only when it is plain:
 * it starts with '/', every byte is one of `A-Z a-z 0-9 - . _ ~ /` (so no percent-encoding, no
 * ';' path parameter, no backslash), and no segment is empty ("//", a trailing '/'), "." or
 * "..". A spelling a server might read as the repository's path after decoding or normalising
 * it is never taken for it: such a request goes out without the credential. The query of
 * info/refs must be exactly one of the two above; the two service paths take no query at all
 * (not even an empty one); LFS paths take any query.
 */
enum sl_git_path {
    SL_GIT_PATH_NONE = 0,
    SL_GIT_PATH_INFO_REFS_UPLOAD,
    SL_GIT_PATH_INFO_REFS_RECEIVE,
    SL_GIT_PATH_UPLOAD_PACK,
    SL_GIT_PATH_RECEIVE_PACK,
    SL_GIT_PATH_LFS,
    SL_GIT_PATH_LFS_BATCH,
};

/* Classifies `target` (an origin-form request target, path and query) for the repository whose
 * path is `base` ("" or "/seg..." without a trailing '/') followed by '/' and `repo`
 * ("owner/name"), as the table above says. `base` and `repo` come from a validated snapshot;
 * `target` is hostile. */
enum sl_git_path sl_git_path_of(struct sl_slice base, struct sl_slice repo, struct sl_slice target);

/* A short name of `p` for people ("git-receive-pack", "info/refs (upload)", "Git LFS"); static. */
const char *sl_git_path_name(enum sl_git_path p);

/* The repository ("owner/name"), NUL-terminated. Borrowed from the snapshot. */
const char *sl_git_repo(const struct sl_git *g);

/* True when the git access is "write". */
bool sl_git_can_write(const struct sl_git *g);

/* The default branch and the protected globs, for explanations. Borrowed. */
const char *sl_git_default_branch(const struct sl_git *g);
size_t sl_git_protected_count(const struct sl_git *g);
const char *sl_git_protected(const struct sl_git *g, size_t i);

/* Does a push that updates, creates or deletes `ref` (a full ref name, `n` bytes, as a
 * receive-pack command names it) touch the default branch or a protected one? True when `ref`
 * is `refs/heads/BRANCH` and BRANCH is the default branch or matches one of the protected globs
 * ('*' matches any run of characters, '/' included, the empty run too). Both the prefix and the
 * branch are compared ignoring ASCII case: a server whose refs live on a case-insensitive file
 * system would write `refs/heads/MAIN` into main. */
bool sl_git_ref_is_protected(const struct sl_git *g, struct sl_slice ref);

/* The same test of `ref` against a default branch and a list of globs, for the fuzz target and
 * explanations without a snapshot. */
bool sl_git_ref_matches(struct sl_slice ref, struct sl_slice default_branch,
                        const struct sl_slice *globs, size_t n_globs);

#endif
