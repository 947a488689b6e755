/* SPDX-License-Identifier: Apache-2.0 */
#include "control/store/model.h"

#include <string.h>

#include "base/mem.h"

void sl_env_row_finish(struct sl_env_row *r)
{
    if (r->repos != NULL) {
        for (size_t i = 0; i < r->n_repos; i++) {
            sl_free(r->repos[i]);
        }
        sl_free(r->repos);
    }
    sl_free(r->name);
    sl_free(r->description);
    sl_free(r->base_image);
    sl_free(r->env_json);
    sl_free(r->egress_json);
    memset(r, 0, sizeof(*r));
}

void sl_user_finish(struct sl_user *u)
{
    sl_free(u->name);
    memset(u, 0, sizeof(*u));
}
