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
    sl_free(r->registry_json);
    memset(r, 0, sizeof(*r));
}

void sl_user_finish(struct sl_user *u)
{
    sl_free(u->name);
    sl_free(u->email);
    memset(u, 0, sizeof(*u));
}

bool sl_user_name_is_valid(const char *name)
{
    size_t n = name != NULL ? strlen(name) : 0;

    if (n == 0 || n > 64 || name[0] == '.' || name[0] == '_' || name[0] == '-') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.'
              || c == '_' || c == '-')) {
            return false;
        }
    }
    return true;
}

bool sl_user_email_is_valid(const char *email)
{
    size_t n = email != NULL ? strlen(email) : 0;
    const char *at = n > 0 ? strchr(email, '@') : NULL;

    if (n == 0 || n > 254 || at == NULL || at == email || at[1] == '\0'
        || strchr(at + 1, '@') != NULL) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)email[i];

        if (c <= 0x20 || c >= 0x7f || strchr("<>,\"'\\", c) != NULL) {
            return false;
        }
    }
    return true;
}

const char *sl_repo_role_name(enum sl_repo_role role)
{
    switch (role) {
    case SL_REPO_ROLE_NONE:
        return "none";
    case SL_REPO_ROLE_READ:
        return "read";
    case SL_REPO_ROLE_WRITE:
        return "write";
    case SL_REPO_ROLE_ADMIN:
        return "admin";
    }
    return "none";
}

bool sl_repo_role_parse(const char *text, enum sl_repo_role *out)
{
    static const enum sl_repo_role roles[] = { SL_REPO_ROLE_READ, SL_REPO_ROLE_WRITE,
                                               SL_REPO_ROLE_ADMIN };

    for (size_t i = 0; text != NULL && i < sizeof(roles) / sizeof(roles[0]); i++) {
        if (strcmp(text, sl_repo_role_name(roles[i])) == 0) {
            *out = roles[i];
            return true;
        }
    }
    return false;
}
