/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/rules.c - validation of environments and rules (docs/reference/snapshot.md §3), and the
 * error list.
 *
 * Validation never stops at the first error: a person fixing a policy wants every problem at
 * once. Each error carries the JSON path of the value at fault. Nothing secret (credential
 * values, tokens) is ever quoted in a message.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/jpath.h"
#include "base/mem.h"
#include "policy/placeholder.h"
#include "policy/snapshot_int.h"
#include "policy/validate.h"

static const char *const env_keys[] = { "default", "rules", "label", "observe_until" };
static const char *const rule_keys[] = { "host", "methods", "credential", "tls" };
static const char *const credential_keys[] = { "header", "value", "placeholder_env" };

void sl_policy_errors_finish(struct sl_policy_errors *e)
{
    sl_free(e->items);
    *e = (struct sl_policy_errors){ NULL, 0, false };
}

void sl__error(struct sl__parse *p, const char *fmt, ...)
{
    struct sl_policy_errors *e = p->errs;
    va_list ap;
    int rc;

    p->n_errors++;
    if (e == NULL) {
        return;
    }
    va_start(ap, fmt);
    rc = sl_errlist_vadd(&e->items, &e->count, &e->truncated, SL_POLICY_ERRORS_MAX, p->path, fmt,
                         ap);
    va_end(ap);
    if (rc < 0) {
        p->rc = rc;
    }
}

void sl__warn(struct sl__parse *p, const char *fmt, ...)
{
    struct sl_policy_errors *w = p->warns;
    va_list ap;
    int rc;

    if (w == NULL) {
        return;
    }
    va_start(ap, fmt);
    rc = sl_errlist_vadd(&w->items, &w->count, &w->truncated, SL_POLICY_ERRORS_MAX, p->path, fmt,
                         ap);
    va_end(ap);
    if (rc < 0) {
        p->rc = rc;
    }
}

void sl__check_keys(struct sl__parse *p, json_t *obj, const char *const *allowed, size_t n)
{
    const char *key;
    json_t *value;
    char expected[160];

    sl_jpath_join(expected, sizeof(expected), allowed, n);
    json_object_foreach(obj, key, value)
    {
        bool known = false;

        for (size_t i = 0; i < n && !known; i++) {
            known = strcmp(key, allowed[i]) == 0;
        }
        if (!known) {
            size_t mark = sl__path_key(p, key);

            sl__error(p, "unknown field (expected %s)", expected);
            sl__path_pop(p, mark);
        }
    }
}

const char *sl__get_string(struct sl__parse *p, json_t *obj, const char *key, bool required,
                           size_t *len)
{
    json_t *v = json_object_get(obj, key);
    const char *s = NULL;
    size_t mark;

    if (v == NULL && !required) {
        return NULL;
    }
    mark = sl__path_key(p, key);
    if (v == NULL) {
        sl__error(p, "required field missing");
    } else if (!json_is_string(v)) {
        sl__error(p, "must be a string");
    } else {
        s = json_string_value(v);
        *len = json_string_length(v);
        if (strlen(s) != *len) {
            sl__error(p, "must not contain NUL characters");
            s = NULL;
        }
    }
    sl__path_pop(p, mark);
    return s;
}

/* The arena copy of `n` bytes of `s`; records SL_ENOMEM on failure. */
static char *keep(struct sl__parse *p, const char *s, size_t n)
{
    char *d = sl_arena_strndup(&p->s->arena, s, n);

    if (d == NULL) {
        p->rc = SL_ENOMEM;
    }
    return d;
}

static void parse_host(struct sl__parse *p, const char *s, size_t n, struct sl__rule *r)
{
    struct sl_host h;
    const char *why = "";
    char quoted[SL_JPATH_QUOTED_CAP];
    char text[SL_HOST_NAME_MAX + 8];
    unsigned notes;
    int w;

    if (sl_host_parse_authority(sl_slice_of(s, n), SL_HOST_GLOB, &h, &r->port, &why) != 0
        || sl_host_check_pattern(&h, &why) != 0) {
        sl__quote(quoted, sizeof(quoted), s, n);
        sl__error(p, "bad host pattern %s: %s", quoted, why);
        return;
    }
    if (r->port != 0) {
        w = snprintf(text, sizeof(text), "%s:%u", h.name, (unsigned)r->port);
    } else {
        w = snprintf(text, sizeof(text), "%s", h.name);
    }
    notes = sl_host_notes(sl_slice_of(s, n));
    if (notes != 0) {
        sl__quote(quoted, sizeof(quoted), s, n);
        sl__warn(p, "host pattern %s is matched as \"%s\" (%s)", quoted, text,
                 sl_host_notes_phrase(notes));
    }
    r->pattern = keep(p, h.name, h.len);
    r->pattern_len = (uint32_t)h.len;
    r->host_kind = h.kind;
    r->text = keep(p, text, w > 0 ? (size_t)w : 0);
}

/* One entry of `methods`; returns its arena copy or NULL after recording the error. */
static const char *parse_method(struct sl__parse *p, json_t *v)
{
    char quoted[SL_JPATH_QUOTED_CAP];
    char upper[SL_POLICY_METHOD_LEN_MAX + 1];
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    enum sl_policy_method_fault f;

    if (!json_is_string(v)) {
        sl__error(p, "must be a string");
        return NULL;
    }
    sl__quote(quoted, sizeof(quoted), s, n);
    f = sl_policy_method_check(s, n);
    if (f == SL_POLICY_METHOD_LOWERCASE) {
        for (size_t i = 0; i < n; i++) {
            upper[i] = s[i] >= 'a' && s[i] <= 'z' ? (char)(s[i] - 'a' + 'A') : s[i];
        }
        upper[n] = '\0';
        sl__error(p, "methods are case-sensitive: %s would never match; did you mean \"%s\"?",
                  quoted, upper);
        return NULL;
    }
    if (f != SL_POLICY_METHOD_OK) {
        sl__error(p, "%s %s", quoted, sl_policy_method_phrase(f));
        return NULL;
    }
    return keep(p, s, n);
}

static void parse_methods(struct sl__parse *p, json_t *json, struct sl__rule *r)
{
    size_t n = json_array_size(json);
    const char **methods;
    size_t mark;

    if (json == NULL) {
        return;
    }
    mark = sl__path_key(p, "methods");
    if (!json_is_array(json)) {
        sl__error(p, "must be an array of method names");
    } else if (n > SL_POLICY_METHODS_MAX) {
        sl__error(p, "too many methods (%zu; at most %d)", n, SL_POLICY_METHODS_MAX);
    } else if (n > 0 && (methods = sl_arena_alloc(&p->s->arena, n * sizeof(*methods))) == NULL) {
        p->rc = SL_ENOMEM;
    } else {
        for (size_t i = 0; i < n && p->rc == 0; i++) {
            size_t m = sl__path_index(p, i);

            methods[i] = parse_method(p, json_array_get(json, i));
            for (size_t j = 0; j < i && methods[i] != NULL; j++) {
                if (methods[j] != NULL && strcmp(methods[i], methods[j]) == 0) {
                    sl__error(p, "duplicate method \"%s\"", methods[i]);
                    break;
                }
            }
            sl__path_pop(p, m);
        }
        r->methods = n > 0 ? methods : NULL;
        r->n_methods = (uint32_t)n;
    }
    sl__path_pop(p, mark);
}

static bool header_ok(struct sl__parse *p, const char *s, size_t n)
{
    char quoted[SL_JPATH_QUOTED_CAP];
    const char *why;

    if (sl_policy_header_name_ok(s, n, &why)) {
        return true;
    }
    sl__quote(quoted, sizeof(quoted), s, n);
    sl__error(p, "%s %s", quoted, why);
    return false;
}

/* The value is secret: messages say what is wrong, never what it is. */
static bool value_ok(struct sl__parse *p, const char *s, size_t n)
{
    enum sl_policy_value_fault f = sl_policy_credential_value_check(s, n);

    if (f != SL_POLICY_VALUE_OK) {
        sl__error(p, "%s", sl_policy_value_phrase(f));
    }
    return f == SL_POLICY_VALUE_OK;
}

const struct sl__credential *sl__parse_credential(struct sl__parse *p, json_t *json)
{
    struct sl__credential *c;
    const char *header;
    const char *value;
    const char *env;
    size_t hn = 0;
    size_t vn = 0;
    size_t en = 0;
    size_t mark = sl__path_key(p, "credential");
    bool ok;

    if (!json_is_object(json)) {
        sl__error(p, "must be an object with \"header\" and \"value\"");
        sl__path_pop(p, mark);
        return NULL;
    }
    sl__check_keys(p, json, credential_keys, SL_ARRAY_LEN(credential_keys));
    header = sl__get_string(p, json, "header", true, &hn);
    value = sl__get_string(p, json, "value", true, &vn);
    if (header != NULL) {
        size_t m = sl__path_key(p, "header");

        ok = header_ok(p, header, hn);
        sl__path_pop(p, m);
        header = ok ? header : NULL;
    }
    if (value != NULL) {
        size_t m = sl__path_key(p, "value");

        ok = value_ok(p, value, vn);
        sl__path_pop(p, m);
        value = ok ? value : NULL;
    }
    env = sl__get_string(p, json, "placeholder_env", false, &en);
    if (env != NULL && !sl_placeholder_env_ok(env, en)) {
        size_t m = sl__path_key(p, "placeholder_env");
        char quoted[SL_JPATH_QUOTED_CAP];

        sl__quote(quoted, sizeof(quoted), env, en);
        sl__error(p, "%s is not a variable name (a shell identifier of 1-%d characters)", quoted,
                  SL_PLACEHOLDER_ENV_MAX);
        sl__path_pop(p, m);
        header = NULL;
    }
    sl__path_pop(p, mark);
    if (header == NULL || value == NULL) {
        return NULL;
    }
    c = sl_arena_alloc(&p->s->arena, sizeof(*c));
    if (c == NULL) {
        p->rc = SL_ENOMEM;
        return NULL;
    }
    c->header = keep(p, header, hn);
    c->value = keep(p, value, vn);
    c->placeholder_env = env != NULL ? keep(p, env, en) : NULL;
    return c;
}

/* `tls`: "intercept" (the default) or "passthrough". */
static void parse_tls(struct sl__parse *p, json_t *json, struct sl__rule *r)
{
    const char *mode;
    size_t n = 0;
    size_t mark;

    mode = sl__get_string(p, json, "tls", false, &n);
    if (mode == NULL) {
        return;
    }
    mark = sl__path_key(p, "tls");
    if (strcmp(mode, "passthrough") == 0) {
        r->passthrough = true;
    } else if (strcmp(mode, "intercept") != 0) {
        sl__error(p, "must be \"intercept\" or \"passthrough\"");
    }
    sl__path_pop(p, mark);
}

/* A passthrough tunnel is relayed without being decrypted: the proxy never sees a method, and
 * has no request to put a credential in. Saying otherwise would promise what is not enforced. */
static void check_passthrough(struct sl__parse *p, json_t *json, const struct sl__rule *r)
{
    size_t mark;

    if (!r->passthrough) {
        return;
    }
    if (json_array_size(json_object_get(json, "methods")) > 0) {
        mark = sl__path_key(p, "methods");
        sl__error(p, "a \"tls\": \"passthrough\" rule cannot filter methods: the proxy does not "
                     "see the requests inside the tunnel");
        sl__path_pop(p, mark);
    }
    if (json_object_get(json, "credential") != NULL) {
        mark = sl__path_key(p, "credential");
        sl__error(p, "a \"tls\": \"passthrough\" rule cannot carry a credential: the proxy does "
                     "not see the requests inside the tunnel");
        sl__path_pop(p, mark);
    }
}

static void parse_rule(struct sl__parse *p, json_t *json, struct sl__rule *r)
{
    json_t *credential;
    const char *host;
    size_t n = 0;

    if (!json_is_object(json)) {
        sl__error(p, "a rule must be an object");
        return;
    }
    sl__check_keys(p, json, rule_keys, SL_ARRAY_LEN(rule_keys));
    host = sl__get_string(p, json, "host", true, &n);
    if (host != NULL) {
        size_t mark = sl__path_key(p, "host");

        parse_host(p, host, n, r);
        sl__path_pop(p, mark);
    }
    parse_methods(p, json_object_get(json, "methods"), r);
    credential = json_object_get(json, "credential");
    if (credential != NULL) {
        r->credential = sl__parse_credential(p, credential);
    }
    parse_tls(p, json, r);
    check_passthrough(p, json, r);
}

/* A variable holds one placeholder: two credentials of a list naming it would be ambiguous.
 * Rule `i` (the path points at it) against the rules before it. */
static void check_placeholder_unique(struct sl__parse *p, const struct sl__rule *rules, size_t i)
{
    const struct sl__credential *c = rules[i].credential;
    size_t mark;

    if (c == NULL || c->placeholder_env == NULL) {
        return;
    }
    for (size_t j = 0; j < i; j++) {
        const struct sl__credential *o = rules[j].credential;

        if (o != NULL && o->placeholder_env != NULL
            && strcmp(o->placeholder_env, c->placeholder_env) == 0) {
            mark = sl__path_key(p, "credential");
            (void)sl__path_key(p, "placeholder_env");
            sl__error(p,
                      "\"%s\" is the placeholder_env of rule %zu too (a variable holds one "
                      "placeholder)",
                      c->placeholder_env, j);
            sl__path_pop(p, mark);
            return;
        }
    }
}

void sl__parse_rules(struct sl__parse *p, json_t *json, struct sl__ruleset *rs)
{
    size_t n = json_array_size(json);
    size_t creds = 0;
    size_t mark;

    *rs = (struct sl__ruleset){ 0 };
    if (json == NULL) {
        return;
    }
    mark = sl__path_key(p, "rules");
    if (!json_is_array(json)) {
        sl__error(p, "must be an array of rules");
        sl__path_pop(p, mark);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        creds += json_object_get(json_array_get(json, i), "credential") != NULL;
    }
    if (n > SL_POLICY_RULES_MAX) {
        sl__error(p, "too many rules (%zu; at most %d)", n, SL_POLICY_RULES_MAX);
    }
    if (creds > SL_POLICY_CREDENTIALS_MAX) {
        sl__error(p, "too many credentials (%zu; at most %d)", creds, SL_POLICY_CREDENTIALS_MAX);
    }
    if (n > 0 && n <= SL_POLICY_RULES_MAX && creds <= SL_POLICY_CREDENTIALS_MAX) {
        rs->rules = sl_arena_alloc(&p->s->arena, n * sizeof(*rs->rules));
        if (rs->rules == NULL) {
            p->rc = SL_ENOMEM;
        } else {
            memset(rs->rules, 0, n * sizeof(*rs->rules));
            for (size_t i = 0; i < n && p->rc == 0; i++) {
                size_t m = sl__path_index(p, i);

                parse_rule(p, json_array_get(json, i), &rs->rules[i]);
                check_placeholder_unique(p, rs->rules, i);
                sl__path_pop(p, m);
            }
            rs->n = (uint32_t)n;
            rs->n_credentials = (uint32_t)creds;
            p->s->n_rules += n;
            p->s->n_credentials += creds;
        }
    }
    sl__path_pop(p, mark);
}

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.'
           || c == '_' || c == '-';
}

/* "label": what refusals call the environment (sl_policy_label_ok()). */
static void parse_label(struct sl__parse *p, json_t *json, struct sl_env *env)
{
    size_t n = 0;
    const char *label = sl__get_string(p, json, "label", false, &n);
    size_t mark;

    if (label == NULL) {
        return;
    }
    mark = sl__path_key(p, "label");
    if (sl_policy_label_ok(label, n)) {
        env->label = keep(p, label, n);
    } else {
        sl__error(p, "must be 1-%d bytes without control characters", SL_POLICY_LABEL_MAX);
    }
    sl__path_pop(p, mark);
}

/* "observe_until": until when the environment's refusals of host, port and method are let out
 * and marked instead (docs/reference/snapshot.md §3). */
static void parse_observe(struct sl__parse *p, json_t *json, struct sl_env *env)
{
    size_t n = 0;
    const char *s = sl__get_string(p, json, "observe_until", false, &n);
    char quoted[SL_JPATH_QUOTED_CAP];
    size_t mark;

    if (s == NULL) {
        return;
    }
    mark = sl__path_key(p, "observe_until");
    if (sl__parse_rfc3339(s, n, &env->observe_until) == 0) {
        env->has_observe = true;
    } else {
        sl__quote(quoted, sizeof(quoted), s, n);
        sl__error(p, "%s is not an RFC 3339 date-time (like 2026-11-30T23:00:00Z)", quoted);
    }
    sl__path_pop(p, mark);
}

static void parse_env(struct sl__parse *p, const char *name, json_t *json, struct sl_env *env)
{
    size_t n = strlen(name);
    bool name_ok = n >= 1 && n <= SL_POLICY_NAME_MAX;
    const char *def;
    size_t dn = 0;

    for (size_t i = 0; i < n && name_ok; i++) {
        name_ok = is_name_char(name[i]);
    }
    if (!name_ok) {
        sl__error(p, "environment names are 1-128 characters of A-Z a-z 0-9 . _ -");
    }
    env->name = keep(p, name, n);
    env->label = env->name;
    if (!json_is_object(json)) {
        sl__error(p, "an environment must be an object");
        return;
    }
    sl__check_keys(p, json, env_keys, SL_ARRAY_LEN(env_keys));
    parse_label(p, json, env);
    def = sl__get_string(p, json, "default", true, &dn);
    if (def != NULL) {
        size_t mark = sl__path_key(p, "default");

        if (strcmp(def, "allow") == 0 || strcmp(def, "deny") == 0) {
            env->default_allow = def[0] == 'a';
        } else {
            sl__error(p, "must be \"deny\" or \"allow\"");
        }
        sl__path_pop(p, mark);
    }
    parse_observe(p, json, env);
    sl__parse_rules(p, json_object_get(json, "rules"), &env->rules);
}

void sl__parse_envs(struct sl__parse *p, json_t *json)
{
    struct sl_snapshot *s = p->s;
    size_t n = json_object_size(json);
    size_t mark = sl__path_key(p, "environments");
    const char *name;
    json_t *value;
    uint32_t i = 0;

    if (json == NULL) {
        sl__error(p, "required field missing");
    } else if (!json_is_object(json)) {
        sl__error(p, "must be an object of environments by name");
    } else if (n > SL_POLICY_ENVS_MAX) {
        sl__error(p, "too many environments (%zu; at most %d)", n, SL_POLICY_ENVS_MAX);
    } else if ((s->envs = sl_arena_alloc(&s->arena, (n + 1) * sizeof(*s->envs))) == NULL
               || sl__table_init(&s->env_by_name, &s->arena, n) != 0) {
        p->rc = SL_ENOMEM;
    } else {
        memset(s->envs, 0, (n + 1) * sizeof(*s->envs));
        json_object_foreach(json, name, value)
        {
            size_t m = sl__path_key(p, name);
            uint32_t first;

            parse_env(p, name, value, &s->envs[i]);
            sl__path_pop(p, m);
            if (p->rc != 0) {
                break;
            }
            /* Names are unique: jansson refused duplicate keys. */
            (void)sl__table_add(&s->env_by_name, s->envs[i].name, strlen(s->envs[i].name), i,
                                &first);
            i++;
        }
        s->n_envs = i;
        p->envs_ok = p->rc == 0;
    }
    sl__path_pop(p, mark);
}
