/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/git/gitlocal.h - the local git platform (docs/git-platform.md): repositories and roles
 * kept in sluice's own store (registered through /api/v1/repos, docs/reference/api.md §5.9),
 * and, when `--git-url` is set, the smart-HTTP server there, which every sandbox reaches with
 * the operator's `--git-token` as `Authorization: Basic base64(x-access-token:TOKEN)`. The
 * proxy puts that credential on the sandbox's own repository paths only; a sandbox's access ends
 * when its snapshot entry does, so revoke() has nothing to call.
 *
 * Lifecycle: sl_gitlocal_create() -> sl_gitlocal_set_remote() (optional, before any other
 * call) -> the operations of gitplat.h -> gp->ops->destroy(gp).
 */
#ifndef SL_CONTROL_GIT_GITLOCAL_H
#define SL_CONTROL_GIT_GITLOCAL_H

#include <stddef.h>

#include "base/err.h"
#include "control/git/gitplat.h"
#include "control/store/store.h"

/* A local platform over `st` (borrowed; it must outlive the platform), without a remote.
 * Returns 0 or SL_ENOMEM. */
SL_MUST_CHECK int sl_gitlocal_create(struct sl_store *st, struct sl_gitplat **out);

/* Sets the remote: `url` (`--git-url`, sl_git_remote_parse()) and `token` (`--git-token`: one
 * line of at most 300 bytes), both copied. Returns 0, SL_EINVAL with the reason in `err`, or
 * SL_ENOMEM; on failure the platform has no remote. */
SL_MUST_CHECK int sl_gitlocal_set_remote(struct sl_gitplat *gp, const char *url, const char *token,
                                         char *err, size_t errlen);

#endif
