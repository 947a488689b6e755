/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/store/model.h - the control plane's records as the database holds them
 * (docs/control-plane.md). Value types shared by the store (control/store/store) and the API logic
 * (control/env/environment, control/env/resolve): the store reads and writes them, the API turns
 * them into and from JSON. Strings are NUL-terminated and owned by whoever filled the struct (the
 * store allocates with sl_malloc; free with the matching *_finish function).
 */
#ifndef SL_CONTROL_STORE_MODEL_H
#define SL_CONTROL_STORE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length of a UUID in text form, without the terminator. */
#define SL_UUID_LEN 36

enum sl_scope {
    SL_SCOPE_USER = 0,
    SL_SCOPE_GLOBAL,
};

struct sl_user {
    char id[SL_UUID_LEN + 1];
    /* Owned. */
    char *name;
    bool is_admin;
    /* A disabled user's tokens are refused and their sandboxes lose their proxy entries. */
    bool disabled;
    /* The address git commits of their sandboxes carry; NULL when none was given. Owned. */
    char *email;
    char created_at[32];
};

/* A user's role in a repository (docs/reference/api.md §5.9), in increasing power; NONE is no
 * role at all. Comparable: a role allows what every lower one allows. */
enum sl_repo_role {
    SL_REPO_ROLE_NONE = 0,
    SL_REPO_ROLE_READ,
    SL_REPO_ROLE_WRITE,
    SL_REPO_ROLE_ADMIN,
};

/* One environment row plus its repository bindings. */
struct sl_env_row {
    char id[SL_UUID_LEN + 1];
    /* Owned strings. */
    char *name;
    char *description;
    enum sl_scope scope;
    /* Owner's user id for user scope; "" for global. */
    char owner_id[SL_UUID_LEN + 1];
    bool is_default;
    char *base_image;
    /* image_pull "always" (true) or "if-missing". */
    bool image_pull_always;
    /* {"username","sealed"}: the registry's credentials for base_image, the password sealed;
     * NULL for none. Owned. */
    char *registry_json;
    /* CPUs x 100, or -1 for "inherit". */
    int64_t cpus_centi;
    /* Bytes, or -1 for "inherit". */
    int64_t memory_bytes;
    /* true = network on. */
    bool network;
    /* Sealed-per-value JSON, see docs/control-plane.md. env_json is never NULL ("[]" when
     * empty); egress_json is NULL when the network is off. Owned. */
    char *env_json;
    char *egress_json;
    /* Repository paths, `n_repos` of them. Owned (array and strings). */
    char **repos;
    size_t n_repos;
    /* In observe (learn mode) until this time, in Unix seconds; -1 (or 0) when not. Read from
     * the store; written only by sl_store_env_set_observe(), never by an insert or replace. */
    int64_t observe_until;
    char created_at[32];
    char updated_at[32];
};

/* Frees the owned members and zeroes the row. A zeroed row is fine. */
void sl_env_row_finish(struct sl_env_row *r);

/* Frees the owned members of a user and zeroes it. */
void sl_user_finish(struct sl_user *u);

/* A user name as new users get one: 1-64 characters of A-Z a-z 0-9 . _ -, starting with a
 * letter or digit (it appears in paths, in logs and in the noreply email of git commits). */
bool sl_user_name_is_valid(const char *name);

/* An email address as a user may give one: at most 254 bytes of visible ASCII, one '@' with
 * something on both sides, no '<', '>', ',', quotes or backslash (it becomes GIT_AUTHOR_EMAIL
 * in sandboxes). */
bool sl_user_email_is_valid(const char *email);

/* The role's name ("read", "write", "admin"; "none" for SL_REPO_ROLE_NONE). */
const char *sl_repo_role_name(enum sl_repo_role role);

/* Reads a role name ("read", "write" or "admin"). Returns false for anything else. */
bool sl_repo_role_parse(const char *text, enum sl_repo_role *out);

#endif
