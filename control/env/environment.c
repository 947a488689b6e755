/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/env/environment.c - validation, keep-on-resave, sealing and rendering of environments
 * (SPEC.md §5.1, docs/control-plane.md).
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
#include "policy/host.h"
#include "policy/snapshot.h"
#include "policy/validate.h"

#define MIB ((int64_t)1 << 20)
#define GIB ((int64_t)1 << 30)

static const char *const root_keys[] = { "name",   "description", "scope",   "base_image",
                                         "cpus",   "memory",      "network", "env",
                                         "egress", "repositories" };
/* Members of the rendering that a client may send back unchanged; ignored. */
static const char *const root_readonly[] = { "id",         "owner",      "is_default",
                                             "created_at", "updated_at", "undecryptable" };
static const char *const var_keys[] = { "name", "value", "secret" };
static const char *const egress_keys[] = { "default", "rules" };
static const char *const rule_keys[] = { "host", "methods", "credential", "tls" };
static const char *const credential_keys[] = { "header", "value" };
static const char *const credential_readonly[] = { "has_value" };

/* The state of one validation: the path of the field being looked at and the errors so far. */
struct parse {
    struct sl_env_errors *errs;
    char path[SL_ENV_FIELD_MAX];
    size_t path_len;
    /* SL_ENOMEM once memory ran out (validation carries on but the result is failure). */
    int rc;
    /* Errors found, including those past SL_ENV_ERRORS_MAX. */
    size_t n_errors;
    /* How many of them are 409 (a kept value that does not open) rather than 422. */
    size_t n_conflicts;
};

/* ---- errors and field paths --------------------------------------------------------------- */

void sl_env_errors_finish(struct sl_env_errors *e)
{
    sl_free(e->items);
    memset(e, 0, sizeof(*e));
}

static void refuse(struct sl_env_errors *e, int status, const char *message)
{
    e->status = status;
    (void)snprintf(e->message, sizeof(e->message), "%s", message);
}

static void add_error(struct parse *p, const char *fmt, ...) SL_PRINTF(2, 3);

static void add_error(struct parse *p, const char *fmt, ...)
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

/* Enters member `key`: `.key`, or `["key"]` for a key that is not a plain identifier (it came
 * from the request). Returns the mark for path_pop(). */
static size_t path_key(struct parse *p, const char *key)
{
    return sl_jpath_key(p->path, sizeof(p->path), &p->path_len, key);
}

static size_t path_index(struct parse *p, size_t i)
{
    return sl_jpath_index(p->path, sizeof(p->path), &p->path_len, i);
}

static void path_pop(struct parse *p, size_t mark)
{
    sl_jpath_pop(p->path, &p->path_len, mark);
}

/* An error on member `key` of the current path. */
static void key_error(struct parse *p, const char *key, const char *message)
{
    size_t mark = path_key(p, key);

    add_error(p, "%s", message);
    path_pop(p, mark);
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
static void check_keys(struct parse *p, json_t *obj, const char *const *allowed, size_t n,
                       const char *const *ignored, size_t n_ignored)
{
    char expected[200];
    size_t len = 0;
    const char *key;
    json_t *value;

    expected[0] = '\0';
    for (size_t i = 0; i < n && len < sizeof(expected); i++) {
        int w = snprintf(expected + len, sizeof(expected) - len, "%s%s", i > 0 ? ", " : "",
                         allowed[i]);

        len += w > 0 ? (size_t)w : 0;
    }
    json_object_foreach(obj, key, value)
    {
        if (!in_list(key, allowed, n) && !in_list(key, ignored, n_ignored)) {
            size_t mark = path_key(p, key);

            add_error(p, "unknown field (expected %s)", expected);
            path_pop(p, mark);
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
static const char *string_of(struct parse *p, json_t *v, size_t *len)
{
    const char *s;

    if (!json_is_string(v)) {
        add_error(p, "must be a string");
        return NULL;
    }
    s = json_string_value(v);
    *len = json_string_length(v);
    if (memchr(s, '\0', *len) != NULL) {
        add_error(p, "must not contain NUL characters");
        return NULL;
    }
    return s;
}

/* Member `key` as a string, or NULL (absent and not `required`, or after recording why). */
static const char *get_string(struct parse *p, json_t *obj, const char *key, bool required,
                              size_t *len)
{
    json_t *v = member(obj, key);
    const char *s = NULL;
    size_t mark;

    if (v == NULL && !required) {
        return NULL;
    }
    mark = path_key(p, key);
    if (v == NULL) {
        add_error(p, "required field missing");
    } else {
        s = string_of(p, v, len);
    }
    path_pop(p, mark);
    return s;
}

/* A heap copy of `n` bytes of `s`, or NULL with p->rc set. */
static char *keep(struct parse *p, const char *s, size_t n)
{
    char *d = sl_strndup(s, n);

    if (d == NULL) {
        p->rc = SL_ENOMEM;
    }
    return d;
}

/* Zeroes memory that held a secret; the volatile store is not optimised away. */
static void wipe(void *ptr, size_t n)
{
    volatile uint8_t *v = ptr;

    for (size_t i = 0; i < n; i++) {
        v[i] = 0;
    }
}

static void free_secret(char *s, size_t n)
{
    if (s != NULL) {
        wipe(s, n);
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

/* Code points in UTF-8 text (jansson has checked that it is UTF-8). */
static size_t utf8_chars(const char *s, size_t n)
{
    size_t chars = 0;

    for (size_t i = 0; i < n; i++) {
        chars += ((uint8_t)s[i] & 0xc0) != 0x80;
    }
    return chars;
}

/* Does `s` contain a C0 control (other than those in `allowed`), DEL or a C1 control
 * (U+0080-U+009F, encoded as 0xc2 0x80-0x9f)? */
static bool has_control(const char *s, size_t n, const char *allowed)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];

        if ((c < 0x20 && strchr(allowed, c) == NULL) || c == 0x7f) {
            return true;
        }
        if (c == 0xc2 && i + 1 < n && (uint8_t)s[i + 1] >= 0x80 && (uint8_t)s[i + 1] <= 0x9f) {
            return true;
        }
    }
    return false;
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

        if (pn == 0 || pn > 5) {
            return false;
        }
        for (size_t i = host_n + 1; i < n; i++) {
            if (!is_digit((uint8_t)s[i])) {
                return false;
            }
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

static void parse_name(struct parse *p, json_t *root, struct sl_env_spec *spec)
{
    size_t n = 0;
    const char *s = get_string(p, root, "name", true, &n);
    const char *why = NULL;

    if (s == NULL) {
        return;
    }
    if (n == 0) {
        why = "must not be empty";
    } else if (n > (size_t)SL_ENV_NAME_MAX * 4 || utf8_chars(s, n) > SL_ENV_NAME_MAX) {
        why = "longer than 128 characters";
    } else if (has_control(s, n, "")) {
        why = "must not contain control characters";
    } else if (s[0] == ' ' || s[n - 1] == ' ') {
        why = "must not start or end with a space";
    } else if (is_uuid_shaped(s, n)) {
        why = "must not look like an environment id (a UUID)";
    }
    if (why != NULL) {
        key_error(p, "name", why);
        return;
    }
    spec->name = keep(p, s, n);
}

static void parse_description(struct parse *p, json_t *root, struct sl_env_spec *spec)
{
    size_t n = 0;
    const char *s = get_string(p, root, "description", false, &n);

    if (s == NULL) {
        s = "";
        n = 0;
    } else if (n > (size_t)SL_ENV_DESCRIPTION_MAX * 4
               || utf8_chars(s, n) > SL_ENV_DESCRIPTION_MAX) {
        key_error(p, "description", "longer than 4096 characters");
        return;
    } else if (has_control(s, n, "\t\n\r")) {
        key_error(p, "description", "must not contain control characters but tab and newline");
        return;
    }
    spec->description = keep(p, s, n);
}

static void parse_scope(struct parse *p, json_t *root, struct sl_env_spec *spec)
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
    key_error(p, "scope", "must be \"user\" or \"global\"");
}

static void parse_image(struct parse *p, json_t *root, struct sl_env_spec *spec)
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
        size_t mark = path_key(p, "base_image");

        sl_jpath_quote(quoted, sizeof(quoted), s, n);
        add_error(p, "%s is not an image reference: %s", quoted, why);
        path_pop(p, mark);
        return;
    }
    spec->base_image = keep(p, s, n);
}

static void parse_cpus(struct parse *p, json_t *root, struct sl_env_spec *spec)
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
        key_error(p, "cpus", "must be a number or null");
        return;
    }
    if (!(json_number_value(v) > 0)) {
        key_error(p, "cpus", "must be greater than 0");
        return;
    }
    if (json_number_value(v) > SL_ENV_CPUS_CENTI_MAX / 100.0) {
        key_error(p, "cpus", "at most 1024");
        return;
    }
    /* JSON numbers arrive as doubles: 1.1 is 110.00000000000001 hundredths, 1.005 is not
     * within a millionth of a whole number of hundredths. */
    centi = json_number_value(v) * 100;
    whole = (int64_t)(centi + 0.5);
    diff = centi - (double)whole;
    if (diff > 1e-6 || diff < -1e-6 || whole < 1) {
        key_error(p, "cpus", "at most two decimals (0.01 steps)");
        return;
    }
    spec->cpus_centi = whole;
}

static void parse_memory(struct parse *p, json_t *root, struct sl_env_spec *spec)
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
        key_error(p, "memory", "must be an integer followed by MiB or GiB, like \"512MiB\"");
        return;
    }
    unit = s[n - 3] == 'G' ? GIB : MIB;
    for (size_t i = 0; i < n - 3; i++) {
        if (!is_digit((uint8_t)s[i])) {
            key_error(p, "memory", "must be an integer followed by MiB or GiB, like \"512MiB\"");
            return;
        }
        if (value <= SL_ENV_MEMORY_MAX) {
            value = value * 10 + (s[i] - '0');
        }
    }
    if (value == 0) {
        key_error(p, "memory", "must be greater than 0");
    } else if (value > SL_ENV_MEMORY_MAX / unit) {
        key_error(p, "memory", "at most 1 TiB (1024GiB)");
    } else {
        spec->memory_bytes = value * unit;
    }
}

/* Returns 1 for on, 0 for off, -1 when missing or invalid (after recording the error). */
static int parse_network(struct parse *p, json_t *root, struct sl_env_spec *spec)
{
    size_t n = 0;
    json_t *v = member(root, "network");
    const char *s;
    size_t mark;

    if (v == NULL) {
        key_error(p, "network",
                  "required field missing: \"on\" or \"off\" (never inherited from the default)");
        return -1;
    }
    mark = path_key(p, "network");
    s = string_of(p, v, &n);
    if (s != NULL && strcmp(s, "on") != 0 && strcmp(s, "off") != 0) {
        add_error(p, "must be \"on\" or \"off\"");
        s = NULL;
    }
    path_pop(p, mark);
    if (s == NULL) {
        return -1;
    }
    spec->network = strcmp(s, "on") == 0;
    return spec->network ? 1 : 0;
}

/* ---- env ---------------------------------------------------------------------------------- */

static void parse_var(struct parse *p, json_t *v, struct sl_env_var *out)
{
    size_t nn = 0;
    size_t vn = 0;
    const char *name;
    const char *value;
    json_t *secret;

    if (!json_is_object(v)) {
        add_error(p, "must be an object with \"name\" and \"value\"");
        return;
    }
    check_keys(p, v, var_keys, SL_ARRAY_LEN(var_keys), NULL, 0);
    name = get_string(p, v, "name", true, &nn);
    if (name != NULL && (nn == 0 || nn > SL_ENV_VAR_NAME_MAX || !sl_env_name_is_valid(name, nn))) {
        key_error(p, "name",
                  nn > SL_ENV_VAR_NAME_MAX ? "longer than 128 characters"
                                           : "must be a shell identifier ([A-Za-z_][A-Za-z0-9_]*)");
        name = NULL;
    }
    value = get_string(p, v, "value", true, &vn);
    if (value != NULL && vn > SL_ENV_VALUE_MAX) {
        key_error(p, "value", "longer than 32768 bytes");
        value = NULL;
    }
    secret = member(v, "secret");
    if (secret != NULL && !json_is_boolean(secret)) {
        key_error(p, "secret", "must be true or false");
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

static void parse_vars(struct parse *p, json_t *root, struct sl_env_spec *spec)
{
    json_t *vars = member(root, "env");
    size_t n = json_array_size(vars);
    size_t mark;

    if (vars == NULL) {
        return;
    }
    mark = path_key(p, "env");
    if (!json_is_array(vars)) {
        add_error(p, "must be an array of {\"name\", \"value\", \"secret\"}");
    } else if (n > SL_ENV_VARS_MAX) {
        add_error(p, "too many variables (%zu; at most %d)", n, SL_ENV_VARS_MAX);
    } else if (n > 0 && (spec->vars = sl_calloc(n, sizeof(*spec->vars))) == NULL) {
        p->rc = SL_ENOMEM;
    } else {
        spec->n_vars = n;
        for (size_t i = 0; i < n; i++) {
            size_t m = path_index(p, i);

            parse_var(p, json_array_get(vars, i), &spec->vars[i]);
            for (size_t j = 0; j < i && spec->vars[i].name != NULL; j++) {
                if (spec->vars[j].name != NULL
                    && strcmp(spec->vars[i].name, spec->vars[j].name) == 0) {
                    key_error(p, "name", "duplicate name (names must be unique)");
                    break;
                }
            }
            path_pop(p, m);
        }
    }
    path_pop(p, mark);
}

/* ---- egress ------------------------------------------------------------------------------- */

static void parse_host(struct parse *p, json_t *rule, struct sl_env_rule *out)
{
    size_t n = 0;
    const char *s = get_string(p, rule, "host", true, &n);
    const char *why = "";
    char quoted[SL_JPATH_QUOTED_CAP];
    char text[SL_HOST_NAME_MAX + 8];
    struct sl_host h;
    uint16_t port = 0;
    int w;

    if (s == NULL) {
        return;
    }
    if (sl_host_parse_authority(sl_slice_of(s, n), SL_HOST_GLOB, &h, &port, &why) != 0) {
        size_t mark = path_key(p, "host");

        sl_jpath_quote(quoted, sizeof(quoted), s, n);
        add_error(p, "bad host pattern %s: %s", quoted, why);
        path_pop(p, mark);
        return;
    }
    if (port != 0) {
        w = snprintf(text, sizeof(text), "%s:%u", h.name, (unsigned)port);
    } else {
        w = snprintf(text, sizeof(text), "%s", h.name);
    }
    out->host = keep(p, text, w > 0 ? (size_t)w : 0);
}

/* One method at the current path; returns whether it is an uppercase token. */
static bool method_ok(struct parse *p, json_t *v, const char **s, size_t *n)
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
        add_error(p, "%s: methods are case-sensitive and must be uppercase", quoted);
    } else if (f != SL_POLICY_METHOD_OK) {
        add_error(p, "%s %s", quoted, sl_policy_method_phrase(f));
    }
    return f == SL_POLICY_METHOD_OK;
}

static void parse_methods(struct parse *p, json_t *rule, struct sl_env_rule *out)
{
    json_t *methods = member(rule, "methods");
    size_t n = json_array_size(methods);
    size_t mark;

    if (methods == NULL) {
        return;
    }
    mark = path_key(p, "methods");
    if (!json_is_array(methods)) {
        add_error(p, "must be an array of method names");
    } else if (n > SL_POLICY_METHODS_MAX) {
        add_error(p, "too many methods (%zu; at most %d)", n, SL_POLICY_METHODS_MAX);
    } else if (n > 0 && (out->methods = sl_calloc(n, sizeof(*out->methods))) == NULL) {
        p->rc = SL_ENOMEM;
    } else {
        for (size_t i = 0; i < n; i++) {
            size_t m = path_index(p, i);
            const char *s;
            size_t sn = 0;

            if (method_ok(p, json_array_get(methods, i), &s, &sn)) {
                bool dup = false;

                for (size_t j = 0; j < out->n_methods && !dup; j++) {
                    dup = strcmp(out->methods[j], s) == 0;
                }
                if (dup) {
                    add_error(p, "duplicate method \"%s\"", s);
                } else if ((out->methods[out->n_methods] = keep(p, s, sn)) != NULL) {
                    out->n_methods++;
                }
            }
            path_pop(p, m);
        }
    }
    path_pop(p, mark);
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

static void parse_credential(struct parse *p, json_t *c, struct sl_env_rule *out)
{
    size_t hn = 0;
    size_t vn = 0;
    const char *header;
    const char *value;
    const char *why;
    char quoted[SL_JPATH_QUOTED_CAP];

    if (!json_is_object(c)) {
        add_error(p, "must be an object with \"header\" and \"value\"");
        return;
    }
    check_keys(p, c, credential_keys, SL_ARRAY_LEN(credential_keys), credential_readonly,
               SL_ARRAY_LEN(credential_readonly));
    header = get_string(p, c, "header", true, &hn);
    if (header != NULL && !sl_policy_header_name_ok(header, hn, &why)) {
        size_t mark = path_key(p, "header");

        sl_jpath_quote(quoted, sizeof(quoted), header, hn);
        add_error(p, "%s %s", quoted, why);
        path_pop(p, mark);
        header = NULL;
    }
    value = get_string(p, c, "value", false, &vn);
    if (value != NULL && (why = value_why(value, vn)) != NULL) {
        key_error(p, "value", why);
        header = NULL;
    }
    if (header == NULL) {
        return;
    }
    out->header = keep(p, header, hn);
    if (value != NULL) {
        out->value = keep(p, value, vn);
        out->value_len = vn;
    }
}

/* `tls`: "intercept" (the default) or "passthrough", whose tunnels the proxy relays without
 * seeing a request: it can neither filter methods nor inject a credential, so asking for
 * either is an error rather than a promise the proxy would not keep (policy/snapshot.h). */
static void parse_tls(struct parse *p, json_t *rule, struct sl_env_rule *out)
{
    size_t n = 0;
    const char *mode = get_string(p, rule, "tls", false, &n);

    if (mode == NULL) {
        return;
    }
    if (strcmp(mode, "passthrough") == 0) {
        out->passthrough = true;
    } else if (strcmp(mode, "intercept") != 0) {
        key_error(p, "tls", "must be \"intercept\" or \"passthrough\"");
        return;
    }
    if (!out->passthrough) {
        return;
    }
    if (json_array_size(member(rule, "methods")) > 0) {
        key_error(p, "methods",
                  "a \"tls\": \"passthrough\" rule cannot filter methods: the proxy does not "
                  "see the requests inside the tunnel");
    }
    if (member(rule, "credential") != NULL) {
        key_error(p, "credential",
                  "a \"tls\": \"passthrough\" rule cannot carry a credential: the proxy does "
                  "not see the requests inside the tunnel");
    }
}

static void parse_rule(struct parse *p, json_t *rule, struct sl_env_rule *out)
{
    json_t *c;

    if (!json_is_object(rule)) {
        add_error(p, "a rule must be an object with \"host\"");
        return;
    }
    check_keys(p, rule, rule_keys, SL_ARRAY_LEN(rule_keys), NULL, 0);
    parse_host(p, rule, out);
    parse_methods(p, rule, out);
    c = member(rule, "credential");
    if (c != NULL) {
        size_t mark = path_key(p, "credential");

        parse_credential(p, c, out);
        path_pop(p, mark);
    }
    parse_tls(p, rule, out);
}

static void parse_rules(struct parse *p, json_t *rules, struct sl_env_spec *spec)
{
    size_t n = json_array_size(rules);
    size_t credentials = 0;
    size_t mark = path_key(p, "rules");

    if (!json_is_array(rules)) {
        add_error(p, "must be an array of rules");
    } else if (n > SL_POLICY_RULES_MAX) {
        add_error(p, "too many rules (%zu; at most %d)", n, SL_POLICY_RULES_MAX);
    } else if (n > 0 && (spec->rules = sl_calloc(n, sizeof(*spec->rules))) == NULL) {
        p->rc = SL_ENOMEM;
    } else {
        spec->n_rules = n;
        for (size_t i = 0; i < n; i++) {
            size_t m = path_index(p, i);
            json_t *rule = json_array_get(rules, i);

            parse_rule(p, rule, &spec->rules[i]);
            credentials += json_is_object(rule) && member(rule, "credential") != NULL;
            path_pop(p, m);
        }
        if (credentials > SL_POLICY_CREDENTIALS_MAX) {
            add_error(p, "too many credentials (%zu; at most %d)", credentials,
                      SL_POLICY_CREDENTIALS_MAX);
        }
    }
    path_pop(p, mark);
}

/* `network` is 1 (on), 0 (off: not called) or -1 (unknown: validate, require nothing). */
static void parse_egress(struct parse *p, json_t *root, int network, struct sl_env_spec *spec)
{
    json_t *egress = member(root, "egress");
    json_t *rules = NULL;
    size_t errors = p->n_errors;
    size_t n = 0;
    const char *def;
    size_t mark = path_key(p, "egress");

    if (egress != NULL && !json_is_object(egress)) {
        add_error(p, "must be an object with \"default\" and \"rules\"");
        path_pop(p, mark);
        return;
    }
    if (egress != NULL) {
        check_keys(p, egress, egress_keys, SL_ARRAY_LEN(egress_keys), NULL, 0);
        def = get_string(p, egress, "default", false, &n);
        if (def != NULL && strcmp(def, "allow") != 0 && strcmp(def, "deny") != 0) {
            key_error(p, "default", "must be \"deny\" or \"allow\"");
        }
        spec->egress_allow = def != NULL && strcmp(def, "allow") == 0;
        rules = member(egress, "rules");
        if (rules != NULL) {
            parse_rules(p, rules, spec);
        }
    }
    if (network == 1 && p->n_errors == errors && !spec->egress_allow && spec->n_rules == 0) {
        key_error(p, "rules",
                  "network is \"on\" with default \"deny\" and no rules, so nothing could get "
                  "out: add a rule, set default to \"allow\", or set network to \"off\"");
    }
    path_pop(p, mark);
}

/* ---- repositories and the whole request --------------------------------------------------- */

static void parse_repos(struct parse *p, json_t *root, struct sl_env_spec *spec)
{
    json_t *repos = member(root, "repositories");
    size_t n = json_array_size(repos);
    size_t mark;

    if (repos == NULL) {
        return;
    }
    mark = path_key(p, "repositories");
    if (!json_is_array(repos)) {
        add_error(p, "must be an array of repository paths");
    } else if (n > SL_ENV_REPOS_MAX) {
        add_error(p, "too many repositories (%zu; at most %d)", n, SL_ENV_REPOS_MAX);
    } else if (n > 0 && (spec->repos = sl_calloc(n, sizeof(*spec->repos))) == NULL) {
        p->rc = SL_ENOMEM;
    } else {
        for (size_t i = 0; i < n; i++) {
            size_t m = path_index(p, i);
            size_t sn = 0;
            const char *s = string_of(p, json_array_get(repos, i), &sn);
            char quoted[SL_JPATH_QUOTED_CAP];
            bool dup = false;

            if (s != NULL && !sl_env_repo_is_valid(s, sn)) {
                sl_jpath_quote(quoted, sizeof(quoted), s, sn);
                add_error(p,
                          "%s is not a repository path (segments of A-Z a-z 0-9 . _ -, at least "
                          "two, separated by single slashes, at most 255 bytes)",
                          quoted);
                s = NULL;
            }
            for (size_t j = 0; s != NULL && j < spec->n_repos && !dup; j++) {
                dup = strcmp(spec->repos[j], s) == 0;
            }
            if (dup) {
                add_error(p, "duplicate repository");
            } else if (s != NULL && (spec->repos[spec->n_repos] = keep(p, s, sn)) != NULL) {
                spec->n_repos++;
            }
            path_pop(p, m);
        }
    }
    path_pop(p, mark);
}

static void parse_root(struct parse *p, json_t *root, struct sl_env_spec *spec)
{
    int network;

    check_keys(p, root, root_keys, SL_ARRAY_LEN(root_keys), root_readonly,
               SL_ARRAY_LEN(root_readonly));
    parse_name(p, root, spec);
    parse_description(p, root, spec);
    parse_scope(p, root, spec);
    parse_image(p, root, spec);
    parse_cpus(p, root, spec);
    parse_memory(p, root, spec);
    network = parse_network(p, root, spec);
    parse_vars(p, root, spec);
    /* SPEC §5.1: "off stores no egress policy". A form that switches the network off still
     * sends its hidden egress section; it is dropped unread rather than judged. */
    if (network != 0) {
        parse_egress(p, root, network, spec);
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
    free_secret(r->value, r->value_len);
}

void sl_env_spec_finish(struct sl_env_spec *spec)
{
    sl_free(spec->name);
    sl_free(spec->description);
    sl_free(spec->base_image);
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
    memset(spec, 0, sizeof(*spec));
}

int sl_env_spec_from_json(json_t *root, struct sl_env_spec *spec, struct sl_env_errors *errs)
{
    struct parse p = { .errs = errs };

    sl_env_errors_finish(errs);
    memset(spec, 0, sizeof(*spec));
    if (!json_is_object(root)) {
        refuse(errs, 400, "the request body must be a JSON object");
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
    refuse(errs, 422, "the environment is invalid");
    return SL_EPOLICY;
}

int sl_env_spec_parse(const void *body, size_t n, struct sl_env_spec *spec,
                      struct sl_env_errors *errs)
{
    json_error_t jerr;
    json_t *root;
    char *near;
    int rc;

    sl_env_errors_finish(errs);
    memset(spec, 0, sizeof(*spec));
    /* jansson recurses once per nesting level; refusing deep documents first bounds its stack. */
    if (sl_jdepth_is_over(body, n, SL_ENV_DEPTH_MAX)) {
        refuse(errs, 400, "the request body is nested too deeply");
        return SL_EPOLICY;
    }
    /* NUL is allowed by the parser so that the validator can name the field that has one. */
    root = json_loadb(body, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (root == NULL) {
        if (json_error_code(&jerr) == json_error_out_of_memory || jerr.text[0] == '\0') {
            return SL_ENOMEM;
        }
        /* jansson quotes the text near the error, which may be part of a secret. */
        near = strstr(jerr.text, " near '");
        if (near != NULL) {
            *near = '\0';
        }
        errs->status = 400;
        (void)snprintf(errs->message, sizeof(errs->message),
                       "the request body is not valid JSON (line %d, column %d: %s)", jerr.line,
                       jerr.column, jerr.text);
        return SL_EPOLICY;
    }
    rc = sl_env_spec_from_json(root, spec, errs);
    json_decref(root);
    return rc;
}

/* ---- stored JSON -------------------------------------------------------------------------- */

/* Parses stored JSON. Returns 0, SL_EIO (damaged) or SL_ENOMEM. jansson reports some
 * allocation failures as syntax errors, so under memory pressure SL_EIO may stand for
 * SL_ENOMEM; both mean "answer 500", and neither is ever read as "nothing stored". */
static int load_stored(const char *text, json_t **out)
{
    json_error_t jerr;

    *out = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (*out != NULL) {
        return 0;
    }
    return json_error_code(&jerr) == json_error_out_of_memory ? SL_ENOMEM : SL_EIO;
}

static bool is_string_member(json_t *obj, const char *key)
{
    return json_is_string(json_object_get(obj, key));
}

int sl_env_load_vars(const char *env_json, json_t **out)
{
    size_t i;
    json_t *v;

    *out = NULL;
    SL_TRY(load_stored(env_json, out));
    if (!json_is_array(*out)) {
        goto fail_damaged;
    }
    json_array_foreach(*out, i, v)
    {
        if (!is_string_member(v, "name") || !is_string_member(v, "sealed")
            || !json_is_boolean(json_object_get(v, "secret"))) {
            goto fail_damaged;
        }
    }
    return 0;
fail_damaged:
    json_decref(*out);
    *out = NULL;
    return SL_EIO;
}

/* A stored rule has no `tls` (intercept) or "tls":"passthrough" without methods or credential. */
static bool stored_tls_ok(json_t *r)
{
    json_t *tls = json_object_get(r, "tls");

    return tls == NULL
           || (json_is_string(tls) && strcmp(json_string_value(tls), "passthrough") == 0
               && json_array_size(json_object_get(r, "methods")) == 0
               && json_object_get(r, "credential") == NULL);
}

static bool stored_rule_ok(json_t *r)
{
    json_t *methods = json_object_get(r, "methods");
    json_t *c = json_object_get(r, "credential");
    size_t i;
    json_t *m;

    if (!is_string_member(r, "host") || !json_is_array(methods)) {
        return false;
    }
    json_array_foreach(methods, i, m)
    {
        if (!json_is_string(m)) {
            return false;
        }
    }
    if (!stored_tls_ok(r)) {
        return false;
    }
    return c == NULL || (is_string_member(c, "header") && is_string_member(c, "sealed"));
}

/* Parses a stored egress_json and checks its shape. Same results as load_stored(). */
static int load_egress(const char *egress_json, json_t **out)
{
    json_t *rules;
    size_t i;
    json_t *r;

    SL_TRY(load_stored(egress_json, out));
    rules = json_object_get(*out, "rules");
    if (!is_string_member(*out, "default") || !json_is_array(rules)) {
        goto fail_damaged;
    }
    json_array_foreach(rules, i, r)
    {
        if (!stored_rule_ok(r)) {
            goto fail_damaged;
        }
    }
    return 0;
fail_damaged:
    json_decref(*out);
    *out = NULL;
    return SL_EIO;
}

struct dump {
    struct sl_buf buf;
    int rc;
};

static int on_dump(const char *s, size_t n, void *arg)
{
    struct dump *d = arg;

    d->rc = sl_buf_append(&d->buf, s, n);
    return d->rc == 0 ? 0 : -1;
}

/* Serialises `j` compactly into a new sl_malloc'd string of at most `max` bytes. Returns 0,
 * SL_ETOOBIG or SL_ENOMEM. Going through a capped sl_buf keeps jansson's allocator out of the
 * row's strings, which are freed with sl_free. */
static int dump_json(json_t *j, size_t max, char **out)
{
    struct dump d = { .rc = 0 };
    int rc = 0;

    sl_buf_init(&d.buf, max);
    if (json_dump_callback(j, on_dump, &d, JSON_COMPACT) != 0) {
        rc = d.rc != 0 ? d.rc : SL_ENOMEM;
    } else if ((*out = sl_strndup(sl_buf_cstr(&d.buf), d.buf.len)) == NULL) {
        rc = SL_ENOMEM;
    }
    sl_buf_finish(&d.buf);
    return rc;
}

/* ---- sealing and keep-on-resave ----------------------------------------------------------- */

/* Seals `n` bytes into `out` (initialised here; the caller finishes it on success). Returns 0,
 * SL_ETOOBIG (the sealed text alone is past SL_ENV_SEALED_MAX), SL_ENOMEM, SL_ECRYPTO (the
 * sealer wrote something that is not printable ASCII) or the sealer's own error. */
static int seal_value(const struct sl_env_sealer *s, const void *v, size_t n, struct sl_buf *out)
{
    int rc;

    sl_buf_init(out, SL_ENV_SEALED_MAX);
    rc = s->seal(s->arg, v, n, out);
    for (size_t i = 0; rc == 0 && i < out->len; i++) {
        if (out->p[i] < 0x20 || out->p[i] > 0x7e) {
            rc = SL_ECRYPTO;
        }
    }
    if (rc == 0 && out->len == 0) {
        rc = SL_ECRYPTO;
    }
    if (rc != 0) {
        sl_buf_finish(out);
    }
    return rc;
}

/* Opens `sealed` into `plain` (initialised here; finish it with finish_plain()). Returns 0
 * when it opens, 1 when it does not, SL_ENOMEM. */
static int open_value(const struct sl_env_sealer *s, const char *sealed, struct sl_buf *plain)
{
    int rc;

    sl_buf_init(plain, SL_ENV_SEALED_MAX);
    rc = s->open(s->arg, sealed, strlen(sealed), plain);
    if (rc == SL_ENOMEM) {
        return rc;
    }
    return rc == 0 ? 0 : 1;
}

static void finish_plain(struct sl_buf *plain)
{
    if (plain->p != NULL) {
        wipe(plain->p, plain->len);
    }
    sl_buf_finish(plain);
}

/* 1 when the sealed text still opens, 0 when not, or SL_ENOMEM. */
static int still_opens(const struct sl_env_sealer *s, const char *sealed)
{
    struct sl_buf plain;
    int rc = open_value(s, sealed, &plain);

    finish_plain(&plain);
    return rc < 0 ? rc : rc == 0;
}

/* A kept value that does not open: 409, as SPEC §5.1 asks for undecryptable values. */
static void conflict(struct parse *p, const char *key)
{
    p->n_conflicts++;
    key_error(p, key,
              "the stored value no longer decrypts (the encryption key changed): give it anew");
}

static json_t *find_var(json_t *vars, const char *name)
{
    size_t i;
    json_t *v;

    json_array_foreach(vars, i, v)
    {
        if (strcmp(json_string_value(json_object_get(v, "name")), name) == 0) {
            return v;
        }
    }
    return NULL;
}

static int append_var(json_t *arr, const struct sl_env_var *v, const char *sealed)
{
    json_t *entry =
            json_pack("{s:s, s:b, s:s}", "name", v->name, "secret", v->secret, "sealed", sealed);

    return json_array_append_new(arr, entry) == 0 ? 0 : SL_ENOMEM;
}

/* Seals (or keeps) one variable at path env[i]; *too_big is set when its sealed form alone
 * exceeds the cap. Returns 0 (problems become errors), SL_ENOMEM or the sealer's error. */
static int seal_var(struct parse *p, const struct sl_env_var *v, json_t *stored,
                    const struct sl_env_sealer *sealer, json_t *arr, bool *too_big)
{
    json_t *old = stored != NULL ? find_var(stored, v->name) : NULL;
    const char *kept = old != NULL ? json_string_value(json_object_get(old, "sealed")) : NULL;
    struct sl_buf b;
    int rc;

    if (v->masked && v->secret) {
        if (kept == NULL) {
            key_error(p, "value",
                      "\"******\" keeps the stored value, but there is none for this name: "
                      "give the value");
            return 0;
        }
        rc = still_opens(sealer, kept);
        if (rc <= 0) {
            if (rc == 0) {
                conflict(p, "value");
            }
            return rc;
        }
        return append_var(arr, v, kept);
    }
    if (v->masked && old != NULL && json_is_true(json_object_get(old, "secret"))) {
        key_error(p, "value",
                  "the stored value is secret: send the value itself to make it non-secret");
        return 0;
    }
    rc = seal_value(sealer, v->value, v->value_len, &b);
    if (rc == SL_ETOOBIG) {
        *too_big = true;
        return 0;
    }
    SL_TRY(rc);
    rc = append_var(arr, v, sl_buf_cstr(&b));
    sl_buf_finish(&b);
    return rc;
}

static int seal_vars(struct parse *p, const struct sl_env_spec *spec, json_t *stored,
                     const struct sl_env_sealer *sealer, char **out)
{
    json_t *arr = json_array();
    size_t mark = path_key(p, "env");
    size_t errors = p->n_errors;
    bool too_big = false;
    int rc = arr != NULL ? 0 : SL_ENOMEM;

    for (size_t i = 0; i < spec->n_vars && rc == 0; i++) {
        size_t m = path_index(p, i);

        rc = seal_var(p, &spec->vars[i], stored, sealer, arr, &too_big);
        path_pop(p, m);
    }
    if (rc == 0 && !too_big && p->n_errors == errors) {
        rc = dump_json(arr, SL_ENV_SEALED_MAX, out);
        too_big = rc == SL_ETOOBIG;
        rc = too_big ? 0 : rc;
    }
    if (too_big) {
        add_error(p, "the variables take more than 32768 bytes (32 KiB) sealed");
    }
    path_pop(p, mark);
    json_decref(arr);
    return rc;
}

/* The sealed credential value that rule `i` keeps: the k-th credential for its host in the
 * stored rules, where k counts the request's earlier credential rules for that host. */
static const char *stored_credential(json_t *stored, const struct sl_env_spec *spec, size_t i)
{
    const char *host = spec->rules[i].host;
    size_t k = 0;
    size_t j;
    json_t *r;

    for (j = 0; j < i; j++) {
        k += spec->rules[j].header != NULL && spec->rules[j].host != NULL
             && strcmp(spec->rules[j].host, host) == 0;
    }
    json_array_foreach(json_object_get(stored, "rules"), j, r)
    {
        json_t *c = json_object_get(r, "credential");

        if (c != NULL && strcmp(json_string_value(json_object_get(r, "host")), host) == 0) {
            if (k == 0) {
                return json_string_value(json_object_get(c, "sealed"));
            }
            k--;
        }
    }
    return NULL;
}

/* The credential of rule `i` as stored, {"header","sealed"}, into `entry`; `*total` adds up
 * the sealed values. Returns 0 (problems become errors), SL_ENOMEM or the sealer's error. */
static int seal_credential(struct parse *p, const struct sl_env_spec *spec, size_t i,
                           json_t *stored, const struct sl_env_sealer *sealer, json_t *entry,
                           size_t *total)
{
    const struct sl_env_rule *r = &spec->rules[i];
    const char *kept = NULL;
    struct sl_buf b = { NULL, 0, 0, 0 };
    size_t mark = path_key(p, "credential");
    int rc = 0;

    if (r->value != NULL) {
        rc = seal_value(sealer, r->value, r->value_len, &b);
        if (rc == SL_ETOOBIG) {
            *total += SL_ENV_SEALED_MAX + 1;
            rc = 0;
        } else if (rc == 0) {
            kept = sl_buf_cstr(&b);
        }
    } else if (stored != NULL && (kept = stored_credential(stored, spec, i)) != NULL) {
        rc = still_opens(sealer, kept);
        if (rc == 0) {
            conflict(p, "value");
            kept = NULL;
        }
        rc = rc < 0 ? rc : 0;
    } else {
        key_error(p, "value",
                  stored != NULL ? "no stored credential for this host to keep: give the value"
                                 : "required field missing");
    }
    path_pop(p, mark);
    if (rc == 0 && kept != NULL) {
        *total += strlen(kept);
        if (json_object_set_new(entry, "credential",
                                json_pack("{s:s, s:s}", "header", r->header, "sealed", kept))
            != 0) {
            rc = SL_ENOMEM;
        }
    }
    sl_buf_finish(&b);
    return rc;
}

static int seal_rule(struct parse *p, const struct sl_env_spec *spec, size_t i, json_t *stored,
                     const struct sl_env_sealer *sealer, json_t *rules, size_t *total)
{
    const struct sl_env_rule *r = &spec->rules[i];
    json_t *methods = json_array();
    json_t *entry = json_pack("{s:s, s:o}", "host", r->host, "methods", methods);

    if (entry == NULL || json_array_append_new(rules, entry) != 0) {
        return SL_ENOMEM;
    }
    for (size_t m = 0; m < r->n_methods; m++) {
        if (json_array_append_new(methods, json_string(r->methods[m])) != 0) {
            return SL_ENOMEM;
        }
    }
    if (r->passthrough && json_object_set_new(entry, "tls", json_string("passthrough")) != 0) {
        return SL_ENOMEM;
    }
    if (r->header == NULL) {
        return 0;
    }
    return seal_credential(p, spec, i, stored, sealer, entry, total);
}

static int seal_egress(struct parse *p, const struct sl_env_spec *spec, json_t *stored,
                       const struct sl_env_sealer *sealer, char **out)
{
    json_t *rules = json_array();
    json_t *doc = json_pack("{s:s, s:o}", "default", spec->egress_allow ? "allow" : "deny", "rules",
                            rules);
    size_t mark = path_key(p, "egress");
    size_t mark_rules = path_key(p, "rules");
    size_t errors = p->n_errors;
    size_t total = 0;
    int rc = doc != NULL ? 0 : SL_ENOMEM;

    for (size_t i = 0; i < spec->n_rules && rc == 0; i++) {
        size_t m = path_index(p, i);

        rc = seal_rule(p, spec, i, stored, sealer, rules, &total);
        path_pop(p, m);
    }
    if (rc == 0 && total > SL_ENV_SEALED_MAX) {
        add_error(p, "the credential values take more than 32768 bytes (32 KiB) sealed");
    }
    path_pop(p, mark_rules);
    if (rc == 0 && p->n_errors == errors) {
        /* Bounded by the limits: 100 rules of a host, 32 methods and a credential. */
        rc = dump_json(doc, (size_t)1 << 20, out);
    }
    path_pop(p, mark);
    json_decref(doc);
    return rc;
}

/* The members of `row` that sl_env_spec_to_row() fills, without the sealed JSON. */
static int copy_plain(const struct sl_env_spec *spec, struct sl_env_row *row)
{
    row->name = sl_strdup(spec->name);
    row->description = sl_strdup(spec->description);
    row->base_image = sl_strdup(spec->base_image);
    SL_ENSURE(row->name != NULL && row->description != NULL && row->base_image != NULL, SL_ENOMEM);
    row->scope = spec->scope;
    row->cpus_centi = spec->cpus_centi;
    row->memory_bytes = spec->memory_bytes;
    row->network = spec->network;
    if (spec->n_repos > 0) {
        row->repos = sl_calloc(spec->n_repos, sizeof(*row->repos));
        SL_ENSURE(row->repos != NULL, SL_ENOMEM);
    }
    for (size_t i = 0; i < spec->n_repos; i++) {
        row->repos[i] = sl_strdup(spec->repos[i]);
        SL_ENSURE(row->repos[i] != NULL, SL_ENOMEM);
        row->n_repos++;
    }
    return 0;
}

static void free_filled(struct sl_env_row *row)
{
    sl_free(row->name);
    sl_free(row->description);
    sl_free(row->base_image);
    sl_free(row->env_json);
    sl_free(row->egress_json);
    for (size_t i = 0; i < row->n_repos; i++) {
        sl_free(row->repos[i]);
    }
    sl_free(row->repos);
    row->name = row->description = row->base_image = row->env_json = row->egress_json = NULL;
    row->repos = NULL;
    row->n_repos = 0;
}

/* Does the request keep anything of the row it replaces (or need to know whether a variable
 * was secret)? */
static bool needs_previous(const struct sl_env_spec *spec)
{
    for (size_t i = 0; i < spec->n_vars; i++) {
        if (spec->vars[i].masked) {
            return true;
        }
    }
    for (size_t i = 0; spec->network && i < spec->n_rules; i++) {
        if (spec->rules[i].header != NULL && spec->rules[i].value == NULL) {
            return true;
        }
    }
    return false;
}

/* The previous row's variables and egress as JSON, loaded only when the request keeps
 * something, so that a PUT giving every value anew replaces a damaged row. Returns 0,
 * SL_EIO (damaged) or SL_ENOMEM. */
static int load_previous(const struct sl_env_spec *spec, const struct sl_env_row *prev,
                         json_t **vars, json_t **egress)
{
    *vars = NULL;
    *egress = NULL;
    if (prev == NULL || !needs_previous(spec)) {
        return 0;
    }
    SL_TRY(sl_env_load_vars(prev->env_json != NULL ? prev->env_json : "[]", vars));
    if (prev->egress_json != NULL) {
        int rc = load_egress(prev->egress_json, egress);

        if (rc != 0) {
            json_decref(*vars);
            *vars = NULL;
            return rc;
        }
    }
    return 0;
}

int sl_env_spec_to_row(const struct sl_env_spec *spec, const struct sl_env_row *prev,
                       const struct sl_env_sealer *sealer, struct sl_env_row *row,
                       struct sl_env_errors *errs)
{
    struct parse p = { .errs = errs };
    json_t *vars = NULL;
    json_t *egress = NULL;
    int rc;

    sl_env_errors_finish(errs);
    rc = load_previous(spec, prev, &vars, &egress);
    if (rc == 0) {
        rc = copy_plain(spec, row);
    }
    if (rc == 0) {
        rc = seal_vars(&p, spec, vars, sealer, &row->env_json);
    }
    if (rc == 0 && spec->network) {
        rc = seal_egress(&p, spec, egress, sealer, &row->egress_json);
    }
    json_decref(vars);
    json_decref(egress);
    rc = rc != 0 ? rc : p.rc;
    if (rc == 0 && p.n_errors > 0) {
        if (p.n_errors == p.n_conflicts) {
            refuse(errs, 409,
                   "stored values no longer decrypt (the encryption key changed): "
                   "give them anew");
        } else {
            refuse(errs, 422, "the environment is invalid");
        }
        rc = SL_EPOLICY;
    }
    if (rc != 0) {
        free_filled(row);
    }
    if (rc != 0 && rc != SL_EPOLICY) {
        sl_env_errors_finish(errs);
    }
    return rc;
}

/* ---- rendering ---------------------------------------------------------------------------- */

static int set_new(json_t *obj, const char *key, json_t *v)
{
    return json_object_set_new(obj, key, v) == 0 ? 0 : SL_ENOMEM;
}

/* Appends `name` to the array `list` unless it is there already. */
static int note_once(json_t *list, const char *name)
{
    size_t i;
    json_t *v;

    json_array_foreach(list, i, v)
    {
        if (strcmp(json_string_value(v), name) == 0) {
            return 0;
        }
    }
    return json_array_append_new(list, json_string(name)) == 0 ? 0 : SL_ENOMEM;
}

void sl_env_format_memory(int64_t bytes, char *buf, size_t cap)
{
    if (bytes % GIB == 0) {
        (void)snprintf(buf, cap, "%lldGiB", (long long)(bytes / GIB));
    } else {
        (void)snprintf(buf, cap, "%lldMiB", (long long)(bytes / MIB));
    }
}

json_t *sl_env_cpus_json(int64_t cpus_centi)
{
    if (cpus_centi < 0) {
        return json_null();
    }
    return json_real((double)cpus_centi / 100.0);
}

static json_t *memory_json(int64_t bytes)
{
    char text[32];

    if (bytes < 0) {
        return json_null();
    }
    sl_env_format_memory(bytes, text, sizeof(text));
    return json_string(text);
}

/* The value member of a rendered variable: opens `sealed`, notes it when it does not open. */
static int var_value(const char *name, bool secret, const char *sealed,
                     const struct sl_env_sealer *sealer, json_t *undecryptable, json_t *entry)
{
    struct sl_buf plain;
    json_t *v;
    int rc = open_value(sealer, sealed, &plain);

    if (rc == 1) {
        rc = note_once(undecryptable, name);
        v = secret ? json_string(SL_ENV_MASK) : json_null();
    } else if (rc == 0) {
        v = secret ? json_string(SL_ENV_MASK) : json_stringn(sl_buf_cstr(&plain), plain.len);
    } else {
        v = NULL;
    }
    finish_plain(&plain);
    if (rc == 0) {
        rc = set_new(entry, "value", v);
    } else {
        json_decref(v);
    }
    return rc;
}

int sl_env_render_var(const char *name, bool secret, const char *sealed,
                      const struct sl_env_sealer *sealer, json_t *undecryptable, json_t **out)
{
    json_t *entry = json_object();
    int rc = entry != NULL ? set_new(entry, "name", json_string(name)) : SL_ENOMEM;

    if (rc == 0 && sealer != NULL) {
        rc = var_value(name, secret, sealed, sealer, undecryptable, entry);
    }
    if (rc == 0) {
        rc = set_new(entry, "secret", json_boolean(secret));
    }
    if (rc != 0) {
        json_decref(entry);
        entry = NULL;
    }
    *out = entry;
    return rc;
}

/* One stored rule in API form; notes the host when its credential does not open. */
static int render_rule(json_t *stored, const struct sl_env_sealer *sealer, json_t *undecryptable,
                       json_t *rules)
{
    json_t *c = json_object_get(stored, "credential");
    const char *host = json_string_value(json_object_get(stored, "host"));
    json_t *rule =
            json_pack("{s:s, s:O}", "host", host, "methods", json_object_get(stored, "methods"));
    int rc;

    if (rule == NULL || json_array_append_new(rules, rule) != 0) {
        return SL_ENOMEM;
    }
    if (json_object_get(stored, "tls") != NULL) {
        /* Returned only when set, so that rules stored before the field read back unchanged. */
        SL_TRY(set_new(rule, "tls", json_string("passthrough")));
    }
    if (c == NULL) {
        return 0;
    }
    rc = set_new(rule, "credential",
                 json_pack("{s:s, s:b}", "header", json_string_value(json_object_get(c, "header")),
                           "has_value", true));
    if (rc == 0 && sealer != NULL) {
        rc = still_opens(sealer, json_string_value(json_object_get(c, "sealed")));
        rc = rc < 0 ? rc : rc == 1 ? 0 : note_once(undecryptable, host);
    }
    return rc;
}

int sl_env_render_egress(const char *egress_json, const struct sl_env_sealer *sealer,
                         json_t *undecryptable, json_t **out)
{
    json_t *stored = NULL;
    json_t *rules = json_array();
    json_t *r;
    size_t i;
    int rc = egress_json != NULL ? load_egress(egress_json, &stored) : 0;

    *out = NULL;
    if (rc == 0 && egress_json == NULL) {
        json_decref(rules);
        *out = json_null();
        return 0;
    }
    if (rc == 0) {
        *out = json_pack("{s:O, s:o}", "default", json_object_get(stored, "default"), "rules",
                         rules);
        rules = NULL;
        rc = *out != NULL ? 0 : SL_ENOMEM;
    }
    json_array_foreach(json_object_get(stored, "rules"), i, r)
    {
        if (rc == 0) {
            rc = render_rule(r, sealer, undecryptable, json_object_get(*out, "rules"));
        }
    }
    json_decref(rules);
    json_decref(stored);
    if (rc != 0) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

static int render_vars(const struct sl_env_row *row, const struct sl_env_sealer *sealer,
                       json_t *undecryptable, json_t *obj)
{
    json_t *stored = NULL;
    json_t *list = json_array();
    json_t *v;
    size_t i;
    int rc = set_new(obj, "env", list);

    if (rc == 0) {
        rc = sl_env_load_vars(row->env_json, &stored);
    }
    json_array_foreach(stored, i, v)
    {
        json_t *entry = NULL;

        if (rc == 0) {
            rc = sl_env_render_var(json_string_value(json_object_get(v, "name")),
                                   json_is_true(json_object_get(v, "secret")),
                                   json_string_value(json_object_get(v, "sealed")), sealer,
                                   undecryptable, &entry);
        }
        if (rc == 0 && json_array_append_new(list, entry) != 0) {
            rc = SL_ENOMEM;
        }
    }
    json_decref(stored);
    return rc;
}

static int render_repos(const struct sl_env_row *row, json_t *obj)
{
    json_t *list = json_array();
    int rc = set_new(obj, "repositories", list);

    for (size_t i = 0; i < row->n_repos && rc == 0; i++) {
        rc = json_array_append_new(list, json_string(row->repos[i])) == 0 ? 0 : SL_ENOMEM;
    }
    return rc;
}

/* The members before "env", in the order of SPEC §5.1. */
static json_t *render_head(const struct sl_env_row *row, const char *owner_name)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:b, s:s, s:o, s:o, s:s}", "id", row->id, "name",
                     row->name, "description", row->description != NULL ? row->description : "",
                     "scope", row->scope == SL_SCOPE_GLOBAL ? "global" : "user", "owner",
                     owner_name != NULL ? json_string(owner_name) : json_null(), "is_default",
                     row->is_default, "base_image", row->base_image, "cpus",
                     sl_env_cpus_json(row->cpus_centi), "memory", memory_json(row->memory_bytes),
                     "network", row->network ? "on" : "off");
}

static int render(const struct sl_env_row *row, const char *owner_name,
                  const struct sl_env_sealer *sealer, json_t **out)
{
    json_t *obj = render_head(row, owner_name);
    json_t *undecryptable = json_array();
    json_t *egress = NULL;
    int rc = obj != NULL && undecryptable != NULL ? 0 : SL_ENOMEM;

    if (rc == 0) {
        rc = render_vars(row, sealer, undecryptable, obj);
    }
    if (rc == 0) {
        rc = sl_env_render_egress(row->egress_json, sealer, undecryptable, &egress);
    }
    if (rc == 0) {
        rc = set_new(obj, "egress", egress);
    }
    if (rc == 0) {
        rc = render_repos(row, obj);
    }
    if (rc == 0) {
        rc = set_new(obj, "created_at", json_string(row->created_at));
    }
    if (rc == 0) {
        rc = set_new(obj, "updated_at", json_string(row->updated_at));
    }
    if (rc == 0 && json_array_size(undecryptable) > 0) {
        rc = set_new(obj, "undecryptable", json_incref(undecryptable));
    }
    json_decref(undecryptable);
    if (rc != 0) {
        json_decref(obj);
        obj = NULL;
    }
    *out = obj;
    return rc;
}

int sl_env_render(const struct sl_env_row *row, const char *owner_name,
                  const struct sl_env_sealer *sealer, json_t **out)
{
    return render(row, owner_name, sealer, out);
}

int sl_env_render_item(const struct sl_env_row *row, const char *owner_name, json_t **out)
{
    return render(row, owner_name, NULL, out);
}

int sl_env_errors_render(const struct sl_env_errors *e, json_t **out)
{
    json_t *obj = json_pack("{s:s}", "message", e->message);
    json_t *list = NULL;
    int rc = obj != NULL ? 0 : SL_ENOMEM;

    if (rc == 0 && e->count > 0) {
        list = json_array();
        rc = set_new(obj, "errors", list);
    }
    for (size_t i = 0; i < e->count && rc == 0; i++) {
        json_t *item =
                json_pack("{s:s, s:s}", "field", e->items[i].path, "message", e->items[i].message);

        rc = json_array_append_new(list, item) == 0 ? 0 : SL_ENOMEM;
    }
    if (rc != 0) {
        json_decref(obj);
        obj = NULL;
    }
    *out = obj;
    return rc;
}
