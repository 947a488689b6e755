/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/api_users.c - users and API tokens (docs/reference/api.md §5.8) of the REST API:
 * admins list, create and change users (disable, enable, promote, demote, email; the last
 * enabled admin stays); everyone lists, creates and revokes their own tokens, each with a scope
 * and an expiry and shown once: never a wider scope nor a later expiry than the token that makes
 * it, and at most TOKENS_LIVE_MAX live ones per user.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <sodium.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/text.h"
#include "base/time.h"
#include "control/store/secrets.h"
#include "control/web/api.h"
#include "control/web/api_int.h"

/* Longest token name, the longest life a token may be given, and how many live API tokens
 * (unexpired, unrevoked) a user may hold. */
#define TOKEN_NAME_MAX  128
#define TOKEN_DAYS_MAX  3650
#define SECONDS_PER_DAY 86400
#define TOKENS_LIVE_MAX 100

/* ---- users -------------------------------------------------------------------------------- */

static json_t *user_json(const struct sl_user *u)
{
    return json_pack("{s:s, s:b, s:b, s:s?, s:s}", "name", u->name, "admin", u->is_admin,
                     "disabled", u->disabled, "email", u->email, "created_at", u->created_at);
}

static json_t *user_item(const void *item)
{
    return user_json(item);
}

static void users_list(struct sl__api_call *c)
{
    struct sl_user *v = NULL;
    size_t n = 0;
    int rc = sl_store_user_list(c->api->store, &v, &n);

    sl__api_set_list(c->res, rc, "listing users", "users", v, n, sizeof(*v), user_item);
    sl_store_free_users(v, n);
}

/* `email` of a body: absent or null (NULL), or a valid address. False with the 422 set. */
static bool read_email(struct sl__api_call *c, const json_t *email, const char *what)
{
    if (email == NULL || json_is_null(email)) {
        return true;
    }
    if (json_is_string(email) && strlen(json_string_value(email)) == json_string_length(email)
        && sl_user_email_is_valid(json_string_value(email))) {
        return true;
    }
    sl__api_set_invalid(c->res, what, "email",
                        "an address like name@example.com (at most 254 bytes, no spaces), or null");
    return false;
}

/* POST /api/v1/users {"name","admin","email"}: the user and its first token (scope admin for
 * an admin, write otherwise), shown once. */
static void user_create(struct sl__api_call *c)
{
    static const char *const known[] = { "name", "admin", "email", "disabled", "created_at" };
    static const char what[] = "the user is invalid";
    char token_name[] = "default";
    char token[SL_TOKEN_SIZE] = "";
    uint8_t hash[SL_TOKEN_HASH_BYTES];
    struct sl_store_token t;
    struct sl_user u;
    json_t *root = sl__api_body_known(c, known, SL_ARRAY_LEN(known), what,
                                      "unknown field (expected name, admin, email)");
    const json_t *admin;
    json_t *doc;
    const char *name;
    int rc;

    memset(&u, 0, sizeof(u));
    memset(&t, 0, sizeof(t));
    if (root == NULL) {
        goto out;
    }
    name = json_string_value(json_object_get(root, "name"));
    admin = json_object_get(root, "admin");
    if (name == NULL || !sl_user_name_is_valid(name)) {
        sl__api_set_invalid(c->res, what, "name",
                            "1-64 letters, digits, '.', '_' or '-', starting with a letter or "
                            "digit");
        goto out;
    }
    if (admin != NULL && !json_is_null(admin) && !json_is_boolean(admin)) {
        sl__api_set_invalid(c->res, what, "admin", "true or false");
        goto out;
    }
    if (!read_email(c, json_object_get(root, "email"), what)) {
        goto out;
    }
    rc = sl_token_new(token);
    if (rc == 0) {
        rc = sl_token_hash(token, hash);
    }
    if (rc == 0) {
        rc = sl_store_user_create(c->api->store, name, json_is_true(admin),
                                  json_string_value(json_object_get(root, "email")), &u);
    }
    if (rc == SL_EEXIST) {
        /* Names differ in more than case: `Alice` is taken by `alice`, and says so. */
        sl__api_set_errorf(c->res, 409, "a user named '%s' exists already",
                           u.name != NULL ? u.name : name);
        goto out;
    }
    if (rc == 0) {
        (void)snprintf(t.user_id, sizeof(t.user_id), "%s", u.id);
        t.scope = u.is_admin ? SL_TOKEN_SCOPE_ADMIN : SL_TOKEN_SCOPE_WRITE;
        t.name = token_name;
        /* Made with the caller's token, it expires with it (as POST /tokens requires): a
         * leaked short-lived admin token must not mint a lasting one through a new user. */
        (void)snprintf(t.expires_at, sizeof(t.expires_at), "%s", c->token_expires_at);
        rc = sl_store_token_add(c->api->store, hash, &t);
    }
    if (rc < 0) {
        sl__api_set_internal(c->res, "creating a user", rc);
        goto out;
    }
    sl_log(SL_LOG_INFO, 0, "msg=\"user created\" user=%s admin=%d by=%s", u.name, u.is_admin,
           c->user.name);
    doc = sl__api_with_token(user_json(&u), token);
    if (doc != NULL
        && json_object_set_new(doc, "token_expires_at",
                               t.expires_at[0] != '\0' ? json_string(t.expires_at) : json_null())
                   != 0) {
        json_decref(doc);
        doc = NULL;
    }
    sl__api_set_json(c->res, 201, doc);
out:
    sodium_memzero(token, sizeof(token));
    sl_user_finish(&u);
    json_decref(root);
}

/* PATCH /api/v1/users/{name} {"disabled","admin","email"}. */
static void user_patch(struct sl__api_call *c, const char *name)
{
    static const char *const known[] = { "disabled", "admin", "email", "name", "created_at" };
    static const char what[] = "the change is invalid";
    struct sl_store_user_change ch;
    struct sl_user u;
    json_t *root = sl__api_body_known(c, known, SL_ARRAY_LEN(known), what,
                                      "unknown field (expected disabled, admin, email)");
    const json_t *disabled;
    const json_t *admin;
    const json_t *email;
    int rc;

    memset(&ch, 0, sizeof(ch));
    memset(&u, 0, sizeof(u));
    if (root == NULL) {
        goto out;
    }
    disabled = json_object_get(root, "disabled");
    admin = json_object_get(root, "admin");
    email = json_object_get(root, "email");
    if (disabled != NULL && !json_is_boolean(disabled)) {
        sl__api_set_invalid(c->res, what, "disabled", "true or false");
        goto out;
    }
    if (admin != NULL && !json_is_boolean(admin)) {
        sl__api_set_invalid(c->res, what, "admin", "true or false");
        goto out;
    }
    if (!read_email(c, email, what)) {
        goto out;
    }
    ch.set_disabled = disabled != NULL;
    ch.disabled = json_is_true(disabled);
    ch.set_admin = admin != NULL;
    ch.is_admin = json_is_true(admin);
    ch.set_email = email != NULL;
    ch.email = json_string_value(email);
    rc = sl_store_user_update(c->api->store, name, &ch, &u);
    if (rc == SL_EINVAL) {
        sl__api_set_error(c->res, 409,
                          "the last enabled admin cannot be disabled or demoted; make another "
                          "admin first");
    } else if (sl__api_store_ok(c->res, rc, "changing a user", "no user '%.128s'", name)) {
        sl_log(SL_LOG_INFO, 0, "msg=\"user changed\" user=%s disabled=%d admin=%d by=%s", u.name,
               u.disabled, u.is_admin, c->user.name);
        c->res->changed = true;
        /* Disabled, or no admin any more: their sandboxes may lose their entries. */
        c->res->revokes = (ch.set_disabled && ch.disabled) || (ch.set_admin && !ch.is_admin);
        sl__api_set_json(c->res, 200, user_json(&u));
    }
out:
    sl_user_finish(&u);
    json_decref(root);
}

void sl__api_route_users(struct sl__api_call *c, const char *tail)
{
    const char *m = c->req->method;
    char name[SL__API_SEGMENT_MAX] = "";
    struct sl_user u;
    int rc;

    if (!sl__api_route_collection(c, tail, "users are for admins only", users_list, user_create,
                                  name, NULL)) {
        return;
    }
    if (strcmp(m, "PATCH") == 0) {
        user_patch(c, name);
        return;
    }
    if (strcmp(m, "GET") != 0) {
        sl__api_set_error(c->res, 405, "use GET or PATCH");
        return;
    }
    memset(&u, 0, sizeof(u));
    rc = sl_store_user_get_by_name(c->api->store, name, &u);
    if (sl__api_store_ok(c->res, rc, "reading a user", "no user '%.128s'", name)) {
        sl__api_set_json(c->res, 200, user_json(&u));
    }
    sl_user_finish(&u);
}

/* ---- tokens ------------------------------------------------------------------------------- */

/* The instant `t` (seconds since the epoch) as RFC 3339 UTC to the second. */
static void rfc3339_at(time_t t, char *out, size_t cap)
{
    struct tm tm;

    if (gmtime_r(&t, &tm) == NULL || strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        (void)snprintf(out, cap, "1970-01-01T00:00:00Z");
    }
}

/* Now, as RFC 3339 UTC to the second, `plus_s` seconds ahead. */
static void rfc3339_in(int64_t plus_s, char *out, size_t cap)
{
    rfc3339_at(time(NULL) + (time_t)plus_s, out, cap);
}

/* The "expires_at" of a new token: an RFC 3339 date-time (any offset) after now and at most
 * TOKEN_DAYS_MAX days ahead, written to `out` as UTC to the second (a fraction dropped: never
 * later than asked). False when it is not one. */
static bool token_expiry_at(const json_t *at, char *out, size_t cap)
{
    const char *s = json_string_value(at);
    struct sl_rfc3339 t;
    int64_t now = (int64_t)time(NULL);
    int64_t when;

    if (s == NULL || sl_time_parse_rfc3339(s, json_string_length(at), &t) != 0) {
        return false;
    }
    when = t.ms >= 0 ? t.ms / 1000 : -1;
    if (when <= now || when > now + (int64_t)TOKEN_DAYS_MAX * SECONDS_PER_DAY) {
        return false;
    }
    rfc3339_at((time_t)when, out, cap);
    return true;
}

static json_t *token_json(const struct sl_store_token *t)
{
    char now[32];

    rfc3339_in(0, now, sizeof(now));
    return json_pack("{s:s, s:s, s:s, s:s, s:s?, s:b}", "id", t->id, "name",
                     t->name != NULL ? t->name : "", "scope", sl_token_scope_name(t->scope),
                     "created_at", t->created_at, "expires_at",
                     t->expires_at[0] != '\0' ? t->expires_at : NULL, "expired",
                     t->expires_at[0] != '\0' && strcmp(now, t->expires_at) >= 0);
}

static json_t *token_item(const void *item)
{
    return token_json(item);
}

static void tokens_list(struct sl__api_call *c)
{
    struct sl_store_token *v = NULL;
    size_t n = 0;
    int rc = sl_store_token_list(c->api->store, c->user.id, &v, &n);

    sl__api_set_list(c->res, rc, "listing tokens", "tokens", v, n, sizeof(*v), token_item);
    sl_store_free_tokens(v, n);
}

/* True for a token name: 1-128 characters (code points; jansson holds UTF-8) without a control
 * character nor an invisible or reordering one (base/text.h), as environment names. */
static bool is_token_name(const json_t *name)
{
    const char *s = json_string_value(name);
    size_t n = json_string_length(name);

    return s != NULL && n > 0 && n <= TOKEN_NAME_MAX * 4 && strlen(s) == n
           && !sl_text_has_control(s, n, "") && !sl_text_has_invisible(s, n)
           && sl_text_chars(s, n) <= TOKEN_NAME_MAX;
}

/* POST /api/v1/tokens {"name","scope","expires_in_days"|"expires_at"}: the token, shown this
 * once. */
static void token_create(struct sl__api_call *c)
{
    static const char *const known[] = { "name", "scope", "expires_in_days", "expires_at" };
    static const char what[] = "the token is invalid";
    char token[SL_TOKEN_SIZE] = "";
    uint8_t hash[SL_TOKEN_HASH_BYTES];
    struct sl_store_token t;
    json_t *root = sl__api_body_known(c, known, SL_ARRAY_LEN(known), what,
                                      "unknown field (expected name, scope, expires_in_days, "
                                      "expires_at)");
    const json_t *days;
    const json_t *at;
    char *name = NULL;
    int rc;

    memset(&t, 0, sizeof(t));
    if (root == NULL) {
        goto out;
    }
    days = json_object_get(root, "expires_in_days");
    at = json_object_get(root, "expires_at");
    if (!is_token_name(json_object_get(root, "name"))) {
        sl__api_set_invalid(c->res, what, "name",
                            "1-128 characters, no control characters, no invisible or "
                            "reordering ones");
        goto out;
    }
    if (!sl_token_scope_parse(json_string_value(json_object_get(root, "scope")), &t.scope)) {
        sl__api_set_invalid(c->res, what, "scope", "\"read\", \"write\" or \"admin\"");
        goto out;
    }
    if (days != NULL && !json_is_null(days)
        && (!json_is_integer(days) || json_integer_value(days) < 1
            || json_integer_value(days) > TOKEN_DAYS_MAX)) {
        sl__api_set_invalid(c->res, what, "expires_in_days",
                            "a whole number from 1 to 3650, or null (never)");
        goto out;
    }
    if (at != NULL && !json_is_null(at)) {
        if (days != NULL && !json_is_null(days)) {
            sl__api_set_invalid(c->res, what, "expires_at",
                                "give expires_in_days or expires_at, not both");
            goto out;
        }
        if (!token_expiry_at(at, t.expires_at, sizeof(t.expires_at))) {
            sl__api_set_invalid(c->res, what, "expires_at",
                                "an RFC 3339 date-time after now and at most 3650 days ahead "
                                "(YYYY-MM-DDTHH:MM:SSZ), or null (never)");
            goto out;
        }
    }
    /* A token never does more than its owner may: admin is an admin's, from an admin token. */
    if (t.scope == SL_TOKEN_SCOPE_ADMIN && !c->user.is_admin) {
        sl__api_set_error(c->res, 403, "only admins may create tokens of scope admin");
        goto out;
    }
    if (json_is_integer(days)) {
        rfc3339_in(json_integer_value(days) * SECONDS_PER_DAY, t.expires_at, sizeof(t.expires_at));
    }
    /* A token made with a token that expires does not outlive it: a leaked short-lived token
     * must not mint a lasting one. Refused, not shortened, so that the caller knows. Both texts
     * are RFC 3339 UTC to the second: their order is the times'. */
    if (c->token_expires_at[0] != '\0'
        && (t.expires_at[0] == '\0' || strcmp(t.expires_at, c->token_expires_at) > 0)) {
        sl__api_set_errorf(c->res, 400,
                           "the token this request uses expires at %s; a token it creates cannot "
                           "expire later (asked for %s)",
                           c->token_expires_at,
                           t.expires_at[0] != '\0' ? t.expires_at : "no expiry");
        goto out;
    }
    name = sl_strdup(json_string_value(json_object_get(root, "name")));
    (void)snprintf(t.user_id, sizeof(t.user_id), "%s", c->user.id);
    t.kind = SL_TOKEN_KIND_API;
    t.name = name;
    rc = name != NULL ? sl_token_new(token) : SL_ENOMEM;
    if (rc == 0) {
        rc = sl_token_hash(token, hash);
    }
    if (rc == 0) {
        rc = sl_store_token_add_capped(c->api->store, hash, &t, TOKENS_LIVE_MAX);
    }
    if (rc == SL_ETOOBIG) {
        sl__api_set_errorf(c->res, 409,
                           "a user may hold at most %d live API tokens (unexpired, not revoked); "
                           "revoke one first (DELETE /api/v1/tokens/{id})",
                           TOKENS_LIVE_MAX);
        goto out;
    }
    if (rc < 0) {
        sl__api_set_internal(c->res, "creating a token", rc);
        goto out;
    }
    sl__api_set_json(c->res, 201, sl__api_with_token(token_json(&t), token));
out:
    sodium_memzero(token, sizeof(token));
    sl_free(name);
    json_decref(root);
}

void sl__api_route_tokens(struct sl__api_call *c, const char *tail)
{
    char id[SL__API_SEGMENT_MAX] = "";
    int rc;

    if (!sl__api_route_collection(c, tail, NULL, tokens_list, token_create, id, NULL)) {
        return;
    }
    if (strcmp(c->req->method, "DELETE") != 0) {
        sl__api_set_error(c->res, 405, "use DELETE");
        return;
    }
    rc = sl_store_token_delete_id(c->api->store, c->user.id, id);
    if (sl__api_store_ok(c->res, rc, "revoking a token", "no token '%.64s'", id)) {
        c->res->status = 204;
    }
}
