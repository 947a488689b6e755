/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/env/environment.c - validation of environment requests (docs/reference/api.md §5.1): the
 * error list with its field paths, the text checks, and every field of the request document. The
 * stored form (keep-on-resave, sealing) is environment_seal.c, the API rendering
 * environment_render.c.
 *
 * Validation never stops at the first problem: a client fixing a form wants every error at
 * once, each with the path of the field at fault. Messages may quote names, hosts and images,
 * never a value: any value may be a secret.
 */
#include "control/env/environment.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "base/jdepth.h"
#include "base/jpath.h"
#include "base/mem.h"
#include "base/text.h"
#include "control/env/environment_int.h"
#include "control/env/jbody.h"
#include "policy/host.h"
#include "policy/placeholder.h"
#include "policy/snapshot.h"
#include "policy/validate.h"

static const char *const root_keys[] = { "name",       "description",   "scope",  "base_image",
                                         "image_pull", "registry_auth", "cpus",   "memory",
                                         "network",    "env",           "egress", "repositories" };
/* Members of the rendering that a client may send back unchanged; ignored. */
static const char *const root_readonly[] = { "id",           "owner",      "is_default",
                                             "created_at",   "updated_at", "undecryptable",
                                             "observe_until" };
static const char *const var_keys[] = { "name", "value", "secret" };
static const char *const egress_keys[] = { "default", "rules" };
static const char *const rule_keys[] = { "host", "methods", "credential", "tls" };
static const char *const credential_keys[] = { "header", "value", "placeholder_env" };
static const char *const credential_readonly[] = { "has_value" };
static const char *const registry_keys[] = { "username", "password" };

/* ---- errors and field paths --------------------------------------------------------------- */

void sl_env_errors_finish(struct sl_env_errors *e)
{
    sl_free(e->items);
    memset(e, 0, sizeof(*e));
}

void sl__env_refuse(struct sl_env_errors *e, int status, const char *message)
{
    e->status = status;
    (void)snprintf(e->message, sizeof(e->message), "%s", message);
}

void sl__env_add_error(struct sl__env_parse *p, const char *fmt, ...)
{
    struct sl_env_errors *e = p->errs;
    va_list ap;
    int rc;

    p->n_errors++;
    va_start(ap, fmt);
    rc = sl_errlist_vadd(&e->items, &e->count, &e->truncated, SL_ENV_ERRORS_MAX, p->path, fmt, ap);
    va_end(ap);
    if (rc < 0) {
        p->rc = rc;
    }
}

void sl__env_add_warning(struct sl__env_parse *p, const char *fmt, ...)
{
    struct sl_env_spec *s = p->warn_to;
    va_list ap;
    int rc;

    if (s == NULL) {
        return;
    }
    va_start(ap, fmt);
    rc = sl_errlist_vadd(&s->warnings, &s->n_warnings, &s->warnings_truncated, SL_ENV_ERRORS_MAX,
                         p->path, fmt, ap);
    va_end(ap);
    if (rc < 0) {
        p->rc = rc;
    }
}

/* An error on member `key` of the current path. */
void sl__env_key_error(struct sl__env_parse *p, const char *key, const char *message)
{
    size_t mark = sl__env_path_key(p, key);

    sl__env_add_error(p, "%s", message);
    sl__env_path_pop(p, mark);
}

static bool in_list(const char *key, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(key, list[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* Reports every member of `obj` that is neither in `allowed` nor in `ignored`. */
static void check_keys(struct sl__env_parse *p, json_t *obj, const char *const *allowed, size_t n,
                       const char *const *ignored, size_t n_ignored)
{
    char expected[200];
    const char *key;
    json_t *value;

    sl_jpath_join(expected, sizeof(expected), allowed, n);
    json_object_foreach(obj, key, value)
    {
        if (!in_list(key, allowed, n) && !in_list(key, ignored, n_ignored)) {
            size_t mark = sl__env_path_key(p, key);

            sl__env_add_error(p, "unknown field (expected %s)", expected);
            sl__env_path_pop(p, mark);
        }
    }
}

/* Member `key` of `obj`, with JSON null read as absent. */
static json_t *member(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);

    return json_is_null(v) ? NULL : v;
}

/* The string `v` (at the current path), or NULL after recording why not. */
static const char *string_of(struct sl__env_parse *p, json_t *v, size_t *len)
{
    const char *s;

    if (!json_is_string(v)) {
        sl__env_add_error(p, "must be a string");
        return NULL;
    }
    s = json_string_value(v);
    *len = json_string_length(v);
    if (memchr(s, '\0', *len) != NULL) {
        sl__env_add_error(p, "must not contain NUL characters");
        return NULL;
    }
    return s;
}

/* Member `key` as a string, or NULL (absent and not `required`, or after recording why). */
static const char *get_string(struct sl__env_parse *p, json_t *obj, const char *key, bool required,
                              size_t *len)
{
    json_t *v = member(obj, key);
    const char *s = NULL;
    size_t mark;

    if (v == NULL && !required) {
        return NULL;
    }
    mark = sl__env_path_key(p, key);
    if (v == NULL) {
        sl__env_add_error(p, "required field missing");
    } else {
        s = string_of(p, v, len);
    }
    sl__env_path_pop(p, mark);
    return s;
}

/* A heap copy of `n` bytes of `s`, or NULL with p->rc set. */
static char *keep(struct sl__env_parse *p, const char *s, size_t n)
{
    char *d = sl_strndup(s, n);

    if (d == NULL) {
        p->rc = SL_ENOMEM;
    }
    return d;
}

/* Zeroes memory that held a secret; the volatile store is not optimised away. */
void sl__env_wipe(void *ptr, size_t n)
{
    volatile uint8_t *v = ptr;

    for (size_t i = 0; i < n; i++) {
        v[i] = 0;
    }
}

static void free_secret(char *s, size_t n)
{
    if (s != NULL) {
        sl__env_wipe(s, n);
        sl_free(s);
    }
}

/* ---- text checks -------------------------------------------------------------------------- */

static bool is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

static bool is_lower_alnum(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || is_digit(c);
}

static bool is_alnum(uint8_t c)
{
    return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

static bool is_hex(uint8_t c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool is_uuid_shaped(const char *s, size_t n)
{
    if (n != SL_UUID_LEN) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;

        if (dash ? s[i] != '-' : !is_hex((uint8_t)s[i])) {
            return false;
        }
    }
    return true;
}

void sl_env_image_registry(const char *ref, char *out, size_t cap)
{
    const char *slash = strchr(ref, '/');
    size_t k = slash != NULL ? (size_t)(slash - ref) : 0;

    if (slash != NULL
        && (memchr(ref, '.', k) != NULL || memchr(ref, ':', k) != NULL
            || (k == 9 && memcmp(ref, "localhost", 9) == 0))) {
        (void)snprintf(out, cap, "%.*s", (int)k, ref);
    } else {
        (void)snprintf(out, cap, "%s", "docker.io");
    }
}

bool sl_env_name_is_reserved(const char *s, size_t n)
{
    /* docs/reference/containers.md §5.4, and what a container cannot do without. */
    static const char *const names[] = {
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "NO_PROXY",
        "no_proxy",
        "ALL_PROXY",
        "all_proxy",
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
        "CI",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "PATH",
        "HOME",
    };

    if ((n == 6 && memcmp(s, "SLUICE", 6) == 0) || (n > 7 && memcmp(s, "SLUICE_", 7) == 0)) {
        return true;
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(names); i++) {
        if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0) {
            return true;
        }
    }
    return false;
}

bool sl_env_name_is_valid(const char *s, size_t n)
{
    if (n == 0 || is_digit((uint8_t)s[0])) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_alnum((uint8_t)s[i]) && s[i] != '_') {
            return false;
        }
    }
    return true;
}

/* A path component of an image name: [a-z0-9]+ joined by '.', '_', "__" or runs of '-'. */
static bool image_component_ok(const char *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        size_t run = 0;

        while (i < n && is_lower_alnum((uint8_t)s[i])) {
            i++;
            run++;
        }
        if (run == 0) {
            return false;
        }
        if (i == n) {
            return true;
        }
        if (s[i] == '.') {
            i++;
        } else if (s[i] == '_') {
            i += i + 1 < n && s[i + 1] == '_' ? 2 : 1;
        } else if (s[i] == '-') {
            while (i < n && s[i] == '-') {
                i++;
            }
        } else {
            return false;
        }
        if (i == n) {
            return false;
        }
    }
    return false;
}

/* A registry: DNS-like labels of [A-Za-z0-9-] separated by dots, and an optional :port. */
static bool image_domain_ok(const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    size_t host_n = colon != NULL ? (size_t)(colon - s) : n;
    size_t label = 0;

    if (colon != NULL) {
        size_t pn = n - host_n - 1;
        unsigned port = 0;

        if (pn == 0 || pn > 5) {
            return false;
        }
        for (size_t i = host_n + 1; i < n; i++) {
            if (!is_digit((uint8_t)s[i])) {
                return false;
            }
            port = port * 10 + (unsigned)(s[i] - '0');
        }
        /* A TCP port: 1-65535, without a leading zero. */
        if (port == 0 || port > 65535 || s[host_n + 1] == '0') {
            return false;
        }
    }
    for (size_t i = 0; i <= host_n; i++) {
        if (i == host_n || s[i] == '.') {
            if (label == 0 || s[i - 1] == '-' || s[i - label] == '-') {
                return false;
            }
            label = 0;
        } else if (is_alnum((uint8_t)s[i]) || s[i] == '-') {
            label++;
        } else {
            return false;
        }
    }
    return true;
}

/* `algorithm:hex` with at least 32 hex digits (sha256:<64>). */
static bool image_digest_ok(const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    size_t an = colon != NULL ? (size_t)(colon - s) : 0;

    if (colon == NULL || an == 0 || n - an - 1 < 32) {
        return false;
    }
    for (size_t i = 0; i < an; i++) {
        uint8_t c = (uint8_t)s[i];

        if (!is_lower_alnum(c) && !(i > 0 && strchr("+._-", c) != NULL)) {
            return false;
        }
    }
    for (size_t i = an + 1; i < n; i++) {
        if (!is_hex((uint8_t)s[i])) {
            return false;
        }
    }
    return true;
}

static bool image_tag_ok(const char *s, size_t n)
{
    if (n == 0 || n > 128 || s[0] == '.' || s[0] == '-') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_alnum((uint8_t)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-') {
            return false;
        }
    }
    return true;
}

/* NULL when `s` is an image reference ([domain/]path[:tag][@digest]); else what is wrong. */
static const char *image_why(const char *s, size_t n)
{
    const char *at = memchr(s, '@', n);
    size_t end = at != NULL ? (size_t)(at - s) : n;
    size_t start = 0;
    size_t last_slash = 0;
    bool first = true;

    if (n == 0) {
        return "must not be empty";
    }
    if (n > SL_ENV_IMAGE_MAX) {
        return "longer than 255 bytes";
    }
    if (at != NULL && !image_digest_ok(at + 1, n - end - 1)) {
        return "bad digest (expected ALGORITHM:HEX, e.g. sha256: and 64 hex digits)";
    }
    for (size_t i = 0; i < end; i++) {
        last_slash = s[i] == '/' ? i + 1 : last_slash;
    }
    for (size_t i = end; i > last_slash; i--) {
        if (s[i - 1] == ':') {
            if (!image_tag_ok(s + i, end - i)) {
                return "bad tag (1-128 of A-Z a-z 0-9 _ . -, not starting with . or -)";
            }
            end = i - 1;
            break;
        }
    }
    while (start <= end) {
        const char *slash = memchr(s + start, '/', end - start);
        size_t stop = slash != NULL ? (size_t)(slash - s) : end;
        const char *c = s + start;
        size_t cn = stop - start;
        bool domain = first && slash != NULL
                      && (memchr(c, '.', cn) != NULL || memchr(c, ':', cn) != NULL
                          || (cn == 9 && memcmp(c, "localhost", 9) == 0));

        if (domain ? !image_domain_ok(c, cn) : !image_component_ok(c, cn)) {
            return domain ? "bad registry host"
                          : "bad name (path components of lowercase letters and digits, "
                            "joined by . _ __ or -, separated by /)";
        }
        first = false;
        start = stop + 1;
    }
    return NULL;
}

bool sl_env_repo_is_valid(const char *s, size_t n)
{
    size_t segments = 0;
    size_t start = 0;

    if (n == 0 || n > SL_ENV_REPO_MAX) {
        return false;
    }
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '/') {
            size_t sn = i - start;

            if (sn == 0 || (sn == 1 && s[start] == '.')
                || (sn == 2 && s[start] == '.' && s[start + 1] == '.')) {
                return false;
            }
            segments++;
            start = i + 1;
        } else if (!is_alnum((uint8_t)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-') {
            return false;
        }
    }
    return segments >= 2;
}

/* ---- scalar fields ------------------------------------------------------------------------ */

static void parse_name(struct sl__env_parse *p, json_t *root, struct sl_env_spec *spec)
{
    size_t n = 0;
    const char *s = get_string(p, root, "name", true, &n);
    const char *why = NULL;

    if (s == NULL) {
        return;
    }
    if (n == 0) {
        why = "must not be empty";
    } else if (n > (size_t)SL_ENV_NAME_MAX * 4 || sl_text_chars(s, n) > SL_ENV_NAME_MAX) {
        why = "longer than 128 characters";
    } else if (sl_text_has_control(s, n, "")) {
        why = "must not contain control characters";
    } else if (sl_text_has_invisible(s, n)) {
        why = "must not contain invisible or reordering characters (zero-width, bidirectional "
              "controls)";
    } else if (s[0] == ' ' || s[n - 1] == ' ') {
        why = "must not start or end with a space";
    } else if (is_uuid_shaped(s, n)) {
        why = "must not look like an environment id (a UUID)";
    }
    if (why != NULL) {
        sl__env_key_error(p, "name", why);
        return;
    }
    spec->name = keep(p, s, n);
}

static void parse_description(struct sl__env_parse *p, json_t *root, struct sl_env_spec *spec)
{
    size_t n = 0;
    const char *s = get_string(p, root, "description", false, &n);

    if (s == NULL) {
        s = "";
        n = 0;
    } else if (n > (size_t)SL_ENV_DESCRIPTION_MAX * 4
               || sl_text_chars(s, n) > SL_ENV_DESCRIPTION_MAX) {
        sl__env_key_error(p, "description", "longer than 4096 characters");
        return;
    } else if (sl_text_has_control(s, n, "\t\n\r")) {
        sl__env_key_error(p, "description",
                          "must not contain control characters but tab and newline");
        return;
    }
    spec->description = keep(p, s, n);
}

static void parse_scope(struct sl__env_parse *p, json_t *root, struct sl_env_spec *spec)
{
    size_t n = 0;
    const char *s = get_string(p, root, "scope", false, &n);

    spec->scope = SL_SCOPE_USER;
    if (s == NULL || strcmp(s, "user") == 0) {
        return;
    }
    if (strcmp(s, "global") == 0) {
        spec->scope = SL_SCOPE_GLOBAL;
        return;
    }
    sl__env_key_error(p, "scope", "must be \"user\" or \"global\"");
}

static void parse_image(struct sl__env_parse *p, json_t *root, struct sl_env_spec *spec)
{
    size_t n = 0;
    const char *s = get_string(p, root, "base_image", true, &n);
    const char *why;
    char quoted[SL_JPATH_QUOTED_CAP];

    if (s == NULL) {
        return;
    }
    why = image_why(s, n);
    if (why != NULL) {
        size_t mark = sl__env_path_key(p, "base_image");

        sl_jpath_quote(quoted, sizeof(quoted), s, n);
        sl__env_add_error(p, "%s is not an image reference: %s", quoted, why);
        sl__env_path_pop(p, mark);
        return;
    }
    spec->base_image = keep(p, s, n);
}

static void parse_image_pull(struct sl__env_parse *p, json_t *root, struct sl_env_spec *spec)
{
    size_t n = 0;
    const char *s = get_string(p, root, "image_pull", false, &n);

    spec->image_pull_always = false;
    if (s == NULL || strcmp(s, "if-missing") == 0) {
        return;
    }
    if (strcmp(s, "always") == 0) {
        spec->image_pull_always = true;
        return;
    }
    sl__env_key_error(p, "image_pull", "must be \"if-missing\" or \"always\"");
}

/* `registry_auth`: {username, password} for the registry of base_image; a password left out
 * keeps the stored one (sl_env_spec_to_row()). The password is secret: a message says what is
 * wrong with it, never what it is. */
static void parse_registry(struct sl__env_parse *p, json_t *root, struct sl_env_spec *spec)
{
    json_t *v = member(root, "registry_auth");
    size_t mark;
    size_t un = 0;
    size_t pn = 0;
    const char *user;
    const char *pass;

    if (v == NULL) {
        return;
    }
    mark = sl__env_path_key(p, "registry_auth");
    if (!json_is_object(v)) {
        sl__env_add_error(p, "must be an object with \"username\" and \"password\", or null");
        sl__env_path_pop(p, mark);
        return;
    }
    check_keys(p, v, registry_keys, SL_ARRAY_LEN(registry_keys), credential_readonly,
               SL_ARRAY_LEN(credential_readonly));
    user = get_string(p, v, "username", true, &un);
    if (user != NULL
        && (un == 0 || un > SL_ENV_REGISTRY_USER_MAX || sl_text_has_control(user, un, ""))) {
        sl__env_key_error(p, "username", "must be 1-255 bytes without control characters");
        user = NULL;
    }
    pass = get_string(p, v, "password", false, &pn);
    if (pass != NULL
        && (pn == 0 || pn > SL_ENV_REGISTRY_PASSWORD_MAX || sl_text_has_control(pass, pn, ""))) {
        sl__env_key_error(p, "password", "must be 1-4096 bytes without control characters");
        user = NULL;
    }
    sl__env_path_pop(p, mark);
    if (user == NULL) {
        return;
    }
    spec->has_registry = true;
    spec->registry_username = keep(p, user, un);
    if (pass != NULL) {
        spec->registry_password = keep(p, pass, pn);
        spec->registry_password_len = pn;
    }
}

static void parse_cpus(struct sl__env_parse *p, json_t *root, struct sl_env_spec *spec)
{
    json_t *v = member(root, "cpus");
    double centi;
    double diff;
    int64_t whole;

    spec->cpus_centi = -1;
    if (v == NULL) {
        return;
    }
    if (!json_is_number(v)) {
        sl__env_key_error(p, "cpus", "must be a number or null");
        return;
    }
    if (!(json_number_value(v) > 0)) {
        sl__env_key_error(p, "cpus", "must be greater than 0");
        return;
    }
    if (json_number_value(v) > SL_ENV_CPUS_CENTI_MAX / 100.0) {
        sl__env_key_error(p, "cpus", "at most 1024");
        return;
    }
    /* JSON numbers arrive as doubles: 1.1 is 110.00000000000001 hundredths, 1.005 is not
     * within a millionth of a whole number of hundredths. */
    centi = json_number_value(v) * 100;
    whole = (int64_t)(centi + 0.5);
    diff = centi - (double)whole;
    if (diff > 1e-6 || diff < -1e-6 || whole < 1) {
        sl__env_key_error(p, "cpus", "at most two decimals (0.01 steps)");
        return;
    }
    spec->cpus_centi = whole;
}

static void parse_memory(struct sl__env_parse *p, json_t *root, struct sl_env_spec *spec)
{
    size_t n = 0;
    const char *s = get_string(p, root, "memory", false, &n);
    int64_t unit;
    int64_t value = 0;

    spec->memory_bytes = -1;
    if (s == NULL) {
        return;
    }
    if (n < 4 || (strcmp(s + n - 3, "MiB") != 0 && strcmp(s + n - 3, "GiB") != 0)
        || (s[0] == '0' && n > 4)) {
        sl__env_key_error(p, "memory",
                          "must be an integer followed by MiB or GiB, like \"512MiB\"");
        return;
    }
    unit = s[n - 3] == 'G' ? SL__ENV_GIB : SL__ENV_MIB;
    for (size_t i = 0; i < n - 3; i++) {
        if (!is_digit((uint8_t)s[i])) {
            sl__env_key_error(p, "memory",
                              "must be an integer followed by MiB or GiB, like \"512MiB\"");
            return;
        }
        if (value <= SL_ENV_MEMORY_MAX) {
            value = value * 10 + (s[i] - '0');
        }
    }
    if (value == 0) {
        sl__env_key_error(p, "memory", "must be greater than 0");
    } else if (value > SL_ENV_MEMORY_MAX / unit) {
        sl__env_key_error(p, "memory", "at most 1 TiB (1024GiB)");
    } else {
        spec->memory_bytes = value * unit;
    }
}

/* Returns 1 for on, 0 for off, -1 when missing or invalid (after recording the error). */
static int parse_network(struct sl__env_parse *p, json_t *root, struct sl_env_spec *spec)
{
    size_t n = 0;
    json_t *v = member(root, "network");
    const char *s;
    size_t mark;

    if (v == NULL) {
        sl__env_key_error(
                p, "network",
                "required field missing: \"on\" or \"off\" (never inherited from the default)");
        return -1;
    }
    mark = sl__env_path_key(p, "network");
    s = string_of(p, v, &n);
    if (s != NULL && strcmp(s, "on") != 0 && strcmp(s, "off") != 0) {
        sl__env_add_error(p, "must be \"on\" or \"off\"");
        s = NULL;
    }
    sl__env_path_pop(p, mark);
    if (s == NULL) {
        return -1;
    }
    spec->network = strcmp(s, "on") == 0;
    return spec->network ? 1 : 0;
}

/* ---- env ---------------------------------------------------------------------------------- */

static void parse_var(struct sl__env_parse *p, json_t *v, struct sl_env_var *out)
{
    size_t nn = 0;
    size_t vn = 0;
    const char *name;
    const char *value;
    json_t *secret;

    if (!json_is_object(v)) {
        sl__env_add_error(p, "must be an object with \"name\" and \"value\"");
        return;
    }
    check_keys(p, v, var_keys, SL_ARRAY_LEN(var_keys), NULL, 0);
    name = get_string(p, v, "name", true, &nn);
    if (name != NULL && (nn == 0 || nn > SL_ENV_VAR_NAME_MAX || !sl_env_name_is_valid(name, nn))) {
        sl__env_key_error(p, "name",
                          nn > SL_ENV_VAR_NAME_MAX
                                  ? "longer than 128 characters"
                                  : "must be a shell identifier ([A-Za-z_][A-Za-z0-9_]*)");
        name = NULL;
    }
    value = get_string(p, v, "value", true, &vn);
    if (value != NULL && vn > SL_ENV_VALUE_MAX) {
        sl__env_key_error(p, "value", "longer than 32768 bytes");
        value = NULL;
    }
    secret = member(v, "secret");
    if (secret != NULL && !json_is_boolean(secret)) {
        sl__env_key_error(p, "secret", "must be true or false");
    }
    out->secret = json_is_true(secret);
    if (name != NULL) {
        out->name = keep(p, name, nn);
    }
    if (value != NULL) {
        out->value = keep(p, value, vn);
        out->value_len = vn;
        out->masked = vn == strlen(SL_ENV_MASK) && memcmp(value, SL_ENV_MASK, vn) == 0;
    }
}

static void parse_vars(struct sl__env_parse *p, json_t *root, struct sl_env_spec *spec)
{
    json_t *vars = member(root, "env");
    size_t n = json_array_size(vars);
    size_t mark;

    if (vars == NULL) {
        return;
    }
    mark = sl__env_path_key(p, "env");
    if (!json_is_array(vars)) {
        sl__env_add_error(p, "must be an array of {\"name\", \"value\", \"secret\"}");
    } else if (n > SL_ENV_VARS_MAX) {
        sl__env_add_error(p, "too many variables (%zu; at most %d)", n, SL_ENV_VARS_MAX);
    } else if (n > 0 && (spec->vars = sl_calloc(n, sizeof(*spec->vars))) == NULL) {
        p->rc = SL_ENOMEM;
    } else {
        spec->n_vars = n;
        for (size_t i = 0; i < n; i++) {
            size_t m = sl__env_path_index(p, i);

            parse_var(p, json_array_get(vars, i), &spec->vars[i]);
            for (size_t j = 0; j < i && spec->vars[i].name != NULL; j++) {
                if (spec->vars[j].name != NULL
                    && strcmp(spec->vars[i].name, spec->vars[j].name) == 0) {
                    sl__env_key_error(p, "name", "duplicate name (names must be unique)");
                    break;
                }
            }
            sl__env_path_pop(p, m);
        }
    }
    sl__env_path_pop(p, mark);
}

/* ---- egress ------------------------------------------------------------------------------- */

static void parse_host(struct sl__env_parse *p, json_t *rule, struct sl_env_rule *out)
{
    size_t n = 0;
    const char *s = get_string(p, rule, "host", true, &n);
    const char *why = "";
    char quoted[SL_JPATH_QUOTED_CAP];
    char text[SL_HOST_NAME_MAX + 8];
    struct sl_host h;
    uint16_t port = 0;
    size_t mark;
    int w;

    if (s == NULL) {
        return;
    }
    mark = sl__env_path_key(p, "host");
    /* The proxy's own checks (policy/host.h), so that a stored environment always compiles. */
    if (sl_host_parse_authority(sl_slice_of(s, n), SL_HOST_GLOB, &h, &port, &why) != 0
        || sl_host_check_pattern(&h, &why) != 0) {
        sl_jpath_quote(quoted, sizeof(quoted), s, n);
        sl__env_add_error(p, "bad host pattern %s: %s", quoted, why);
        sl__env_path_pop(p, mark);
        return;
    }
    if (port != 0) {
        w = snprintf(text, sizeof(text), "%s:%u", h.name, (unsigned)port);
    } else {
        w = snprintf(text, sizeof(text), "%s", h.name);
    }
    if (sl_host_notes(sl_slice_of(s, n)) != 0) {
        sl_jpath_quote(quoted, sizeof(quoted), s, n);
        sl__env_add_warning(p, "host pattern %s is stored as \"%s\" (%s)", quoted, text,
                            sl_host_notes_phrase(sl_host_notes(sl_slice_of(s, n))));
    }
    sl__env_path_pop(p, mark);
    out->host = keep(p, text, w > 0 ? (size_t)w : 0);
}

/* One method at the current path; returns whether it is an uppercase token. */
static bool method_ok(struct sl__env_parse *p, json_t *v, const char **s, size_t *n)
{
    char quoted[SL_JPATH_QUOTED_CAP];
    enum sl_policy_method_fault f;

    *s = string_of(p, v, n);
    if (*s == NULL) {
        return false;
    }
    sl_jpath_quote(quoted, sizeof(quoted), *s, *n);
    f = sl_policy_method_check(*s, *n);
    if (f == SL_POLICY_METHOD_NOT_TOKEN) {
        /* This module names the first offending byte: a lowercase letter before the first
         * non-token byte makes it a case error (the prefix before that letter is all tchar). */
        size_t k = 0;

        while (k < *n && !((*s)[k] >= 'a' && (*s)[k] <= 'z')) {
            k++;
        }
        if (k < *n && (k == 0 || sl_policy_method_check(*s, k) == SL_POLICY_METHOD_OK)) {
            f = SL_POLICY_METHOD_LOWERCASE;
        }
    }
    if (f == SL_POLICY_METHOD_LOWERCASE) {
        sl__env_add_error(p, "%s: methods are case-sensitive and must be uppercase", quoted);
    } else if (f != SL_POLICY_METHOD_OK) {
        sl__env_add_error(p, "%s %s", quoted, sl_policy_method_phrase(f));
    }
    return f == SL_POLICY_METHOD_OK;
}

static void parse_methods(struct sl__env_parse *p, json_t *rule, struct sl_env_rule *out)
{
    json_t *methods = member(rule, "methods");
    size_t n = json_array_size(methods);
    size_t mark;

    if (methods == NULL) {
        return;
    }
    mark = sl__env_path_key(p, "methods");
    if (!json_is_array(methods)) {
        sl__env_add_error(p, "must be an array of method names");
    } else if (n > SL_POLICY_METHODS_MAX) {
        sl__env_add_error(p, "too many methods (%zu; at most %d)", n, SL_POLICY_METHODS_MAX);
    } else if (n > 0 && (out->methods = sl_calloc(n, sizeof(*out->methods))) == NULL) {
        p->rc = SL_ENOMEM;
    } else {
        for (size_t i = 0; i < n; i++) {
            size_t m = sl__env_path_index(p, i);
            const char *s;
            size_t sn = 0;

            if (method_ok(p, json_array_get(methods, i), &s, &sn)) {
                bool dup = false;

                for (size_t j = 0; j < out->n_methods && !dup; j++) {
                    dup = strcmp(out->methods[j], s) == 0;
                }
                if (dup) {
                    sl__env_add_error(p, "duplicate method \"%s\"", s);
                } else if ((out->methods[out->n_methods] = keep(p, s, sn)) != NULL) {
                    out->n_methods++;
                }
            }
            sl__env_path_pop(p, m);
        }
    }
    sl__env_path_pop(p, mark);
}

/* The credential value as policy/validate.h checks it, in this module's words (one phrase for
 * CR and LF). The value is secret: the message says what is wrong, never what it is. */
static const char *value_why(const char *s, size_t n)
{
    enum sl_policy_value_fault f = sl_policy_credential_value_check(s, n);

    if (f == SL_POLICY_VALUE_CR || f == SL_POLICY_VALUE_LF) {
        return "contains a line break (CR or LF), which would split the header";
    }
    return sl_policy_value_phrase(f);
}

/* What is wrong with a `placeholder_env` (NULL: nothing the rule alone can tell). */
static const char *placeholder_env_why(const char *s, size_t n)
{
    if (!sl_placeholder_env_ok(s, n)) {
        return "must be a shell identifier ([A-Za-z_][A-Za-z0-9_]*) of at most 128 characters";
    }
    if (sl_env_name_is_reserved(s, n)) {
        return "is a variable sluice sets itself in every sandbox (docs/reference/containers.md "
               "§5.4)";
    }
    return NULL;
}

static void parse_credential(struct sl__env_parse *p, json_t *c, struct sl_env_rule *out)
{
    size_t hn = 0;
    size_t vn = 0;
    size_t en = 0;
    const char *header;
    const char *value;
    const char *env;
    const char *why;
    char quoted[SL_JPATH_QUOTED_CAP];

    if (!json_is_object(c)) {
        sl__env_add_error(p, "must be an object with \"header\" and \"value\"");
        return;
    }
    check_keys(p, c, credential_keys, SL_ARRAY_LEN(credential_keys), credential_readonly,
               SL_ARRAY_LEN(credential_readonly));
    header = get_string(p, c, "header", true, &hn);
    if (header != NULL && !sl_policy_header_name_ok(header, hn, &why)) {
        size_t mark = sl__env_path_key(p, "header");

        sl_jpath_quote(quoted, sizeof(quoted), header, hn);
        sl__env_add_error(p, "%s %s", quoted, why);
        sl__env_path_pop(p, mark);
        header = NULL;
    }
    value = get_string(p, c, "value", false, &vn);
    if (value != NULL && (why = value_why(value, vn)) != NULL) {
        sl__env_key_error(p, "value", why);
        header = NULL;
    }
    env = get_string(p, c, "placeholder_env", false, &en);
    if (env != NULL && (why = placeholder_env_why(env, en)) != NULL) {
        sl__env_key_error(p, "placeholder_env", why);
        header = NULL;
    }
    if (header == NULL) {
        return;
    }
    out->header = keep(p, header, hn);
    if (env != NULL) {
        out->placeholder_env = keep(p, env, en);
    }
    if (value != NULL) {
        out->value = keep(p, value, vn);
        out->value_len = vn;
    }
}

/* `tls`: "intercept" (the default) or "passthrough", whose tunnels the proxy relays without
 * seeing a request: it can neither filter methods nor inject a credential, so asking for
 * either is an error rather than a promise the proxy would not keep (policy/snapshot.h). */
static void parse_tls(struct sl__env_parse *p, json_t *rule, struct sl_env_rule *out)
{
    size_t n = 0;
    const char *mode = get_string(p, rule, "tls", false, &n);

    if (mode == NULL) {
        return;
    }
    if (strcmp(mode, "passthrough") == 0) {
        out->passthrough = true;
    } else if (strcmp(mode, "intercept") != 0) {
        sl__env_key_error(p, "tls", "must be \"intercept\" or \"passthrough\"");
        return;
    }
    if (!out->passthrough) {
        return;
    }
    if (json_array_size(member(rule, "methods")) > 0) {
        sl__env_key_error(
                p, "methods",
                "a \"tls\": \"passthrough\" rule cannot filter methods: the proxy does not "
                "see the requests inside the tunnel");
    }
    if (member(rule, "credential") != NULL) {
        sl__env_key_error(
                p, "credential",
                "a \"tls\": \"passthrough\" rule cannot carry a credential: the proxy does "
                "not see the requests inside the tunnel");
    }
}

static void parse_rule(struct sl__env_parse *p, json_t *rule, struct sl_env_rule *out)
{
    json_t *c;

    if (!json_is_object(rule)) {
        sl__env_add_error(p, "a rule must be an object with \"host\"");
        return;
    }
    check_keys(p, rule, rule_keys, SL_ARRAY_LEN(rule_keys), NULL, 0);
    parse_host(p, rule, out);
    parse_methods(p, rule, out);
    c = member(rule, "credential");
    if (c != NULL) {
        size_t mark = sl__env_path_key(p, "credential");

        parse_credential(p, c, out);
        sl__env_path_pop(p, mark);
    }
    parse_tls(p, rule, out);
}

static void parse_rules(struct sl__env_parse *p, json_t *rules, struct sl_env_spec *spec)
{
    size_t n = json_array_size(rules);
    size_t credentials = 0;
    size_t mark = sl__env_path_key(p, "rules");

    if (!json_is_array(rules)) {
        sl__env_add_error(p, "must be an array of rules");
    } else if (n > SL_POLICY_RULES_MAX) {
        sl__env_add_error(p, "too many rules (%zu; at most %d)", n, SL_POLICY_RULES_MAX);
    } else if (n > 0 && (spec->rules = sl_calloc(n, sizeof(*spec->rules))) == NULL) {
        p->rc = SL_ENOMEM;
    } else {
        spec->n_rules = n;
        for (size_t i = 0; i < n; i++) {
            size_t m = sl__env_path_index(p, i);
            json_t *rule = json_array_get(rules, i);

            parse_rule(p, rule, &spec->rules[i]);
            credentials += json_is_object(rule) && member(rule, "credential") != NULL;
            sl__env_path_pop(p, m);
        }
        if (credentials > SL_POLICY_CREDENTIALS_MAX) {
            sl__env_add_error(p, "too many credentials (%zu; at most %d)", credentials,
                              SL_POLICY_CREDENTIALS_MAX);
        }
    }
    sl__env_path_pop(p, mark);
}

/* `network` is 1 (on), 0 (off: not called) or -1 (unknown: validate, require nothing). */
static void parse_egress(struct sl__env_parse *p, json_t *root, int network,
                         struct sl_env_spec *spec)
{
    json_t *egress = member(root, "egress");
    json_t *rules = NULL;
    size_t errors = p->n_errors;
    size_t n = 0;
    const char *def;
    size_t mark = sl__env_path_key(p, "egress");

    if (egress != NULL && !json_is_object(egress)) {
        sl__env_add_error(p, "must be an object with \"default\" and \"rules\"");
        sl__env_path_pop(p, mark);
        return;
    }
    if (egress != NULL) {
        check_keys(p, egress, egress_keys, SL_ARRAY_LEN(egress_keys), NULL, 0);
        def = get_string(p, egress, "default", false, &n);
        if (def != NULL && strcmp(def, "allow") != 0 && strcmp(def, "deny") != 0) {
            sl__env_key_error(p, "default", "must be \"deny\" or \"allow\"");
        }
        spec->egress_allow = def != NULL && strcmp(def, "allow") == 0;
        rules = member(egress, "rules");
        if (rules != NULL) {
            parse_rules(p, rules, spec);
        }
    }
    if (network == 1 && p->n_errors == errors && !spec->egress_allow && spec->n_rules == 0) {
        sl__env_key_error(
                p, "rules",
                "network is \"on\" with default \"deny\" and no rules, so nothing could get "
                "out: add a rule, set default to \"allow\", or set network to \"off\"");
    }
    sl__env_path_pop(p, mark);
}

/* ---- repositories and the whole request --------------------------------------------------- */

static void parse_repos(struct sl__env_parse *p, json_t *root, struct sl_env_spec *spec)
{
    json_t *repos = member(root, "repositories");
    size_t n = json_array_size(repos);
    size_t mark;

    if (repos == NULL) {
        return;
    }
    mark = sl__env_path_key(p, "repositories");
    if (!json_is_array(repos)) {
        sl__env_add_error(p, "must be an array of repository paths");
    } else if (n > SL_ENV_REPOS_MAX) {
        sl__env_add_error(p, "too many repositories (%zu; at most %d)", n, SL_ENV_REPOS_MAX);
    } else if (n > 0 && (spec->repos = sl_calloc(n, sizeof(*spec->repos))) == NULL) {
        p->rc = SL_ENOMEM;
    } else {
        for (size_t i = 0; i < n; i++) {
            size_t m = sl__env_path_index(p, i);
            size_t sn = 0;
            const char *s = string_of(p, json_array_get(repos, i), &sn);
            char quoted[SL_JPATH_QUOTED_CAP];
            bool dup = false;

            if (s != NULL && !sl_env_repo_is_valid(s, sn)) {
                sl_jpath_quote(quoted, sizeof(quoted), s, sn);
                sl__env_add_error(
                        p,
                        "%s is not a repository path (segments of A-Z a-z 0-9 . _ -, at least "
                        "two, separated by single slashes, at most 255 bytes)",
                        quoted);
                s = NULL;
            }
            for (size_t j = 0; s != NULL && j < spec->n_repos && !dup; j++) {
                dup = strcmp(spec->repos[j], s) == 0;
            }
            if (dup) {
                sl__env_add_error(p, "duplicate repository");
            } else if (s != NULL && (spec->repos[spec->n_repos] = keep(p, s, sn)) != NULL) {
                spec->n_repos++;
            }
            sl__env_path_pop(p, m);
        }
    }
    sl__env_path_pop(p, mark);
}

/* A variable holds one placeholder (snapshot.md §3), and a placeholder never shares its name
 * with a variable of the environment: the variable could hold the very secret. */
static void check_placeholder_envs(struct sl__env_parse *p, const struct sl_env_spec *spec)
{
    for (size_t i = 0; i < spec->n_rules; i++) {
        const char *env = spec->rules[i].placeholder_env;
        const char *why = NULL;

        for (size_t j = 0; env != NULL && j < i && why == NULL; j++) {
            if (spec->rules[j].placeholder_env != NULL
                && strcmp(spec->rules[j].placeholder_env, env) == 0) {
                why = "is the placeholder_env of an earlier rule too (a variable holds one "
                      "placeholder)";
            }
        }
        for (size_t j = 0; env != NULL && j < spec->n_vars && why == NULL; j++) {
            if (spec->vars[j].name != NULL && strcmp(spec->vars[j].name, env) == 0) {
                why = "is also a variable of this environment (\"env\"): the sandbox would get "
                      "both";
            }
        }
        if (why != NULL) {
            size_t mark = sl__env_path_key(p, "egress");

            (void)sl__env_path_key(p, "rules");
            (void)sl__env_path_index(p, i);
            (void)sl__env_path_key(p, "credential");
            (void)sl__env_path_key(p, "placeholder_env");
            sl__env_add_error(p, "\"%s\" %s", env, why);
            sl__env_path_pop(p, mark);
        }
    }
}

static void parse_root(struct sl__env_parse *p, json_t *root, struct sl_env_spec *spec)
{
    int network;

    check_keys(p, root, root_keys, SL_ARRAY_LEN(root_keys), root_readonly,
               SL_ARRAY_LEN(root_readonly));
    parse_name(p, root, spec);
    parse_description(p, root, spec);
    parse_scope(p, root, spec);
    parse_image(p, root, spec);
    parse_image_pull(p, root, spec);
    parse_registry(p, root, spec);
    parse_cpus(p, root, spec);
    parse_memory(p, root, spec);
    network = parse_network(p, root, spec);
    parse_vars(p, root, spec);
    /* docs/reference/api.md §5.1: "off stores no egress policy". A form that switches the network
     * off still sends its hidden egress section; it is dropped unread rather than judged. */
    if (network != 0) {
        parse_egress(p, root, network, spec);
        check_placeholder_envs(p, spec);
    }
    parse_repos(p, root, spec);
}

static void free_rule(struct sl_env_rule *r)
{
    sl_free(r->host);
    for (size_t i = 0; i < r->n_methods; i++) {
        sl_free(r->methods[i]);
    }
    sl_free(r->methods);
    sl_free(r->header);
    sl_free(r->placeholder_env);
    free_secret(r->value, r->value_len);
}

void sl_env_spec_finish(struct sl_env_spec *spec)
{
    sl_free(spec->name);
    sl_free(spec->description);
    sl_free(spec->base_image);
    sl_free(spec->registry_username);
    free_secret(spec->registry_password, spec->registry_password_len);
    for (size_t i = 0; i < spec->n_vars; i++) {
        sl_free(spec->vars[i].name);
        free_secret(spec->vars[i].value, spec->vars[i].value_len);
    }
    sl_free(spec->vars);
    for (size_t i = 0; i < spec->n_rules; i++) {
        free_rule(&spec->rules[i]);
    }
    sl_free(spec->rules);
    for (size_t i = 0; i < spec->n_repos; i++) {
        sl_free(spec->repos[i]);
    }
    sl_free(spec->repos);
    sl_free(spec->warnings);
    memset(spec, 0, sizeof(*spec));
}

int sl_env_spec_from_json(json_t *root, struct sl_env_spec *spec, struct sl_env_errors *errs)
{
    struct sl__env_parse p = { .errs = errs, .warn_to = spec };

    sl_env_errors_finish(errs);
    memset(spec, 0, sizeof(*spec));
    if (!json_is_object(root)) {
        sl__env_refuse(errs, 400, "the request body must be a JSON object");
        return SL_EPOLICY;
    }
    parse_root(&p, root, spec);
    if (p.rc == 0 && p.n_errors == 0) {
        return 0;
    }
    sl_env_spec_finish(spec);
    if (p.rc != 0) {
        sl_env_errors_finish(errs);
        return p.rc;
    }
    sl__env_refuse(errs, 422, "the environment is invalid");
    return SL_EPOLICY;
}

int sl_env_spec_parse(const void *body, size_t n, struct sl_env_spec *spec,
                      struct sl_env_errors *errs)
{
    json_t *root;
    int rc;

    sl_env_errors_finish(errs);
    memset(spec, 0, sizeof(*spec));
    /* jansson recurses once per nesting level; refusing deep documents first bounds its stack. */
    if (sl_jdepth_is_over(body, n, SL_ENV_DEPTH_MAX)) {
        sl__env_refuse(errs, 400, "the request body is nested too deeply");
        return SL_EPOLICY;
    }
    /* NUL is allowed by the parser so that the validator can name the field that has one. */
    rc = sl_jbody_parse(body, n, SL_JBODY_ALLOW_NUL, &root, errs->message, sizeof(errs->message));
    if (rc == SL_EINVAL) {
        errs->status = 400;
        return SL_EPOLICY;
    }
    SL_TRY(rc);
    rc = sl_env_spec_from_json(root, spec, errs);
    json_decref(root);
    return rc;
}
