/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/api_learn.c - learn mode of an environment (docs/reference/api.md §5.1): putting
 * it in observe for a bounded time and ending it (both written to the control plane's log), the
 * rules its sandboxes' observed and refused requests suggest (the audit log's tail, condensed by
 * control/web/suggest), and applying the rules a caller chose, validated as any PUT.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base/log.h"
#include "control/env/environment.h"
#include "control/web/api.h"
#include "control/web/api_int.h"
#include "control/web/audittail.h"
#include "control/web/suggest.h"
#include "policy/host.h"
#include "policy/snapshot.h"

/* docs/reference/api.md §5.1: observe lasts 60 minutes unless the caller says, 24 hours at most. */
#define OBSERVE_DEFAULT_MIN 60
#define OBSERVE_MAX_MIN     1440
/* Most bytes read from the end of the audit log for suggestions. */
#define SUGGEST_BUDGET_BYTES ((size_t)32 << 20)
/* Characters of an environment name written to the log. */
#define LOG_NAME_MAX 64

bool sl__api_is_learn_route(const char *rest)
{
    return strcmp(rest, "observe") == 0 || strcmp(rest, "suggestions") == 0
           || strcmp(rest, "suggestions/apply") == 0;
}

/* Admins act on global environments, owners on their own (a user environment the caller sees is
 * theirs: sl__api_find_visible()). False with the 403 set. */
static bool may_learn(struct sl__api_call *c, const struct sl_env_row *r, const char *what)
{
    if (r->scope == SL_SCOPE_GLOBAL && !c->user.is_admin) {
        sl__api_set_errorf(c->res, 403, "only admins may %s global environments", what);
        return false;
    }
    return true;
}

/* An environment name fit for a logfmt value in quotes. */
static void log_name(const char *in, char out[LOG_NAME_MAX + 1])
{
    size_t i = 0;

    for (; i < LOG_NAME_MAX && in[i] != '\0'; i++) {
        unsigned char ch = (unsigned char)in[i];

        out[i] = ch >= 0x20 && ch <= 0x7e && ch != '"' && ch != '\\' ? in[i] : '?';
    }
    out[i] = '\0';
}

static void rfc3339(int64_t unix_s, char *out, size_t cap)
{
    time_t t = (time_t)unix_s;
    struct tm tm;

    if (gmtime_r(&t, &tm) == NULL || strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        (void)snprintf(out, cap, "%lld", (long long)unix_s);
    }
}

/* Answers the environment `id` as it is now. */
static void answer_env(struct sl__api_call *c, const char *id)
{
    struct sl_env_row now;
    json_t *doc = NULL;
    int rc;

    memset(&now, 0, sizeof(now));
    rc = sl_store_env_get(c->api->store, id, &now);
    if (rc == 0) {
        rc = sl_env_render(&now, sl__api_owner_name(c, &now), &c->sealer, &doc);
    }
    if (rc < 0) {
        sl__api_set_internal(c->res, "reading an environment", rc);
    } else {
        sl__api_set_json(c->res, 200, doc);
    }
    sl_env_row_finish(&now);
}

/* The minutes of a POST .../observe body ({} or {"minutes": N}; none: the default). Returns -1
 * with the answer set when the body is refused. */
static long observe_minutes(struct sl__api_call *c)
{
    static const char *const known[] = { "minutes" };
    json_t *root;
    json_t *v;
    long minutes = OBSERVE_DEFAULT_MIN;

    if (c->req->body.n == 0) {
        return minutes;
    }
    root = sl__api_body_known(c, known, SL_ARRAY_LEN(known), "the request is invalid",
                              "unknown field (expected minutes)");
    if (root == NULL) {
        return -1;
    }
    v = json_object_get(root, "minutes");
    if (v != NULL && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1
            || json_integer_value(v) > OBSERVE_MAX_MIN) {
            sl__api_set_invalid(c->res, "the request is invalid", "minutes",
                                "a whole number of minutes from 1 to 1440 (24 hours)");
            minutes = -1;
        } else {
            minutes = (long)json_integer_value(v);
        }
    }
    json_decref(root);
    return minutes;
}

/* POST .../observe: observe until now plus the minutes (a new deadline replaces the old one). */
static void observe_start(struct sl__api_call *c, const struct sl_env_row *r)
{
    char name[LOG_NAME_MAX + 1];
    char until_text[32];
    long minutes = observe_minutes(c);
    int64_t until;
    int rc;

    if (minutes < 0) {
        return;
    }
    if (!r->network) {
        sl__api_set_error(c->res, 422,
                          "the environment's network is off: observe has nothing to let out");
        return;
    }
    until = (int64_t)time(NULL) + (int64_t)minutes * 60;
    rc = sl_store_env_set_observe(c->api->store, r->id, until);
    if (!sl__api_store_ok(c->res, rc, "putting an environment in observe", "no environment '%s'",
                          r->id)) {
        return;
    }
    log_name(r->name, name);
    rfc3339(until, until_text, sizeof(until_text));
    sl_log(SL_LOG_INFO, 0,
           "msg=\"environment enters observe: what its policy refuses for host, port or method "
           "is let out and recorded\" env=%s env_name=\"%s\" until=%s minutes=%ld by=%s",
           r->id, name, until_text, minutes, c->user.name);
    c->res->changed = true;
    answer_env(c, r->id);
}

/* DELETE .../observe: observe ends now; the answer waits until every proxy holds it. */
static void observe_end(struct sl__api_call *c, const struct sl_env_row *r)
{
    char name[LOG_NAME_MAX + 1];
    bool was = r->observe_until > (int64_t)time(NULL);
    int rc = sl_store_env_set_observe(c->api->store, r->id, 0);

    if (!sl__api_store_ok(c->res, rc, "ending observe", "no environment '%s'", r->id)) {
        return;
    }
    if (was) {
        log_name(r->name, name);
        sl_log(SL_LOG_INFO, 0, "msg=\"environment leaves observe\" env=%s env_name=\"%s\" by=%s",
               r->id, name, c->user.name);
    }
    c->res->changed = true;
    c->res->revokes = true;
    answer_env(c, r->id);
}

/* ---- suggestions ---- */

static enum sl_audittail_take on_line(void *arg, const char *line, size_t n)
{
    struct sl_suggest *sg = arg;
    json_t *entry = json_loadb(line, n, JSON_REJECT_DUPLICATES, NULL);
    bool counted = json_is_object(entry) && sl_suggest_add(sg, entry);

    json_decref(entry);
    return counted ? SL_AUDITTAIL_COUNT : SL_AUDITTAIL_SKIP;
}

/* GET .../suggestions[?wildcards=1]. */
static void suggestions(struct sl__api_call *c, const struct sl_env_row *r)
{
    char flag[8] = "";
    int qrc = sl__api_query_get(c->req->query, "wildcards", flag, sizeof(flag));
    bool wildcards = qrc == 0 && (strcmp(flag, "1") == 0 || strcmp(flag, "true") == 0);
    struct sl_suggest *sg = NULL;
    json_t *doc = NULL;
    char until[32] = "";
    int rc;

    if (!may_learn(c, r, "read the suggestions of")) {
        return;
    }
    /* A value that is neither on nor off is refused, never read as off. An empty one is none,
     * as for the audit tail's filters. */
    if (qrc == SL_EINVAL
        || (qrc == 0 && !wildcards && flag[0] != '\0' && strcmp(flag, "0") != 0
            && strcmp(flag, "false") != 0)) {
        sl__api_set_json(c->res, 422,
                         json_pack("{s:s, s:[{s:s, s:s}]}", "message", "wildcards: 1 or 0",
                                   "errors", "field", "wildcards", "message",
                                   "must be 1 (or true) or 0 (or false)"));
        return;
    }
    rc = sl_suggest_create(r->id, r->network ? r->egress_json : NULL, &sg);
    if (rc == 0 && c->api->audit_log != NULL) {
        rc = sl_audittail_read(c->api->audit_log, SL_SUGGEST_LINES_MAX, SL_AUDITTAIL_LINE_MAX,
                               SUGGEST_BUDGET_BYTES, on_line, sg, NULL);
        if (rc < 0 && rc != SL_ENOMEM) {
            sl_log(SL_LOG_WARN, 0, "msg=\"cannot read the audit log\" path=\"%s\" err=%s",
                   c->api->audit_log, sl_strerror(rc));
            sl_suggest_destroy(sg);
            sl__api_set_error(c->res, 500,
                              "the audit log cannot be read; see the control plane's log");
            return;
        }
    }
    if (rc == 0) {
        rc = sl_suggest_render(sg, wildcards, &doc);
    }
    sl_suggest_destroy(sg);
    if (rc == 0 && r->observe_until > (int64_t)time(NULL)) {
        rfc3339(r->observe_until, until, sizeof(until));
    }
    if (rc == 0
        && (json_object_set_new(doc, "environment",
                                json_pack("{s:s, s:s}", "id", r->id, "name", r->name))
                    != 0
            || json_object_set_new(doc, "observe_until",
                                   until[0] != '\0' ? json_string(until) : json_null())
                       != 0
            || json_object_set_new(doc, "wildcards", json_boolean(wildcards)) != 0)) {
        rc = SL_ENOMEM;
    }
    if (rc < 0) {
        json_decref(doc);
        sl__api_set_internal(c->res, "suggesting rules", rc);
        return;
    }
    sl__api_set_json(c->res, 200, doc);
}

/* ---- applying chosen rules ---- */

/* `rule`'s host in the form rules are stored in (normal form, `:port` when it has one), into
 * `out`. False when it is no host pattern. */
static bool stored_host(json_t *rule, char *out, size_t cap)
{
    const char *s = json_string_value(json_object_get(rule, "host"));
    struct sl_host h;
    uint16_t port = 0;

    if (s == NULL || sl_host_parse_authority(sl_slice_str(s), SL_HOST_GLOB, &h, &port, NULL) != 0
        || sl_host_check_pattern(&h, NULL) != 0) {
        return false;
    }
    if (port != 0) {
        (void)snprintf(out, cap, "%s:%u", h.name, (unsigned)port);
    } else {
        (void)snprintf(out, cap, "%s", h.name);
    }
    return true;
}

/* Adds `add`'s methods to the existing rule `old` for the same host: a new rule for that host
 * would tie with it and lose (docs/reference/snapshot.md §3 rule choice). No methods on either
 * side is every method. */
static int merge_methods(json_t *old, json_t *add)
{
    json_t *have = json_object_get(old, "methods");
    json_t *more = json_object_get(add, "methods");

    if (json_array_size(have) == 0) {
        return 0;
    }
    if (json_array_size(more) == 0) {
        return json_object_set_new(old, "methods", json_array()) == 0 ? 0 : SL_ENOMEM;
    }
    for (size_t i = 0; i < json_array_size(more); i++) {
        json_t *m = json_array_get(more, i);
        bool dup = false;

        for (size_t j = 0; j < json_array_size(have) && !dup; j++) {
            dup = json_equal(json_array_get(have, j), m);
        }
        if (!dup && json_array_append(have, m) != 0) {
            return SL_ENOMEM;
        }
    }
    return 0;
}

/* Puts the chosen `rules` into the environment document `doc` (its API form): each one merged
 * into an existing rule for exactly its host (methods added), or appended. Returns 0, SL_EINVAL
 * with the 422 set, or SL_ENOMEM. */
static int put_rules(struct sl__api_call *c, json_t *doc, json_t *rules)
{
    json_t *have = json_object_get(json_object_get(doc, "egress"), "rules");
    char field[48];
    char host[SL_HOST_NAME_MAX + 8];
    char other[SL_HOST_NAME_MAX + 8];

    for (size_t i = 0; i < json_array_size(rules); i++) {
        json_t *add = json_array_get(rules, i);
        json_t *into = NULL;

        (void)snprintf(field, sizeof(field), "rules[%zu].host", i);
        if (!json_is_object(add) || !stored_host(add, host, sizeof(host))) {
            sl__api_set_invalid(c->res, "the rules are invalid", field,
                                "a rule is an object with a host pattern, as in PUT");
            return SL_EINVAL;
        }
        for (size_t j = 0; j < json_array_size(have) && into == NULL; j++) {
            json_t *r = json_array_get(have, j);

            if (stored_host(r, other, sizeof(other)) && strcmp(host, other) == 0
                && json_object_get(r, "tls") == NULL && json_object_get(add, "tls") == NULL
                && json_object_get(add, "credential") == NULL) {
                into = r;
            }
        }
        if ((into != NULL                        ? merge_methods(into, add)
             : json_array_append(have, add) == 0 ? 0
                                                 : -1)
            != 0) {
            return SL_ENOMEM;
        }
    }
    return 0;
}

/* POST .../suggestions/apply {"rules": [...]}: exactly the rules sent, added as a PUT of the
 * environment with them would (validated, sealed, stored, answered). */
static void apply(struct sl__api_call *c, const struct sl_env_row *r)
{
    static const char *const known[] = { "rules" };
    char name[LOG_NAME_MAX + 1];
    json_t *root;
    json_t *rules;
    json_t *doc = NULL;
    int rc;

    if (!may_learn(c, r, "change")) {
        return;
    }
    root = sl__api_body_known(c, known, SL_ARRAY_LEN(known), "the request is invalid",
                              "unknown field (expected rules)");
    if (root == NULL) {
        return;
    }
    rules = json_object_get(root, "rules");
    if (!json_is_array(rules) || json_array_size(rules) == 0
        || json_array_size(rules) > SL_POLICY_RULES_MAX) {
        sl__api_set_invalid(c->res, "the request is invalid", "rules",
                            "an array of 1 to 100 rules");
    } else if (!r->network) {
        sl__api_set_error(c->res, 422,
                          "the environment's network is off: switch it on to give it rules");
    } else if ((rc = sl_env_render(r, sl__api_owner_name(c, r), &c->sealer, &doc)) < 0) {
        sl__api_set_internal(c->res, "reading an environment", rc);
    } else if ((rc = put_rules(c, doc, rules)) != SL_EINVAL) {
        if (rc < 0) {
            sl__api_set_internal(c->res, "applying rules", rc);
        } else {
            sl__api_env_write(c, r, doc);
        }
        if (rc == 0 && c->res->status == 200) {
            log_name(r->name, name);
            sl_log(SL_LOG_INFO, 0,
                   "msg=\"suggested rules applied\" env=%s env_name=\"%s\" rules=%zu by=%s", r->id,
                   name, json_array_size(rules), c->user.name);
        }
    }
    json_decref(doc);
    json_decref(root);
}

void sl__api_route_learn(struct sl__api_call *c, const struct sl_env_row *r, const char *rest)
{
    const char *m = c->req->method;

    if (strcmp(rest, "observe") == 0) {
        if (strcmp(m, "POST") != 0 && strcmp(m, "DELETE") != 0) {
            sl__api_set_error(c->res, 405, "use POST or DELETE");
        } else if (may_learn(c, r, "put in or take out of observe")) {
            if (strcmp(m, "POST") == 0) {
                observe_start(c, r);
            } else {
                observe_end(c, r);
            }
        }
    } else if (strcmp(rest, "suggestions") == 0) {
        if (strcmp(m, "GET") != 0) {
            sl__api_set_error(c->res, 405, "use GET");
        } else {
            suggestions(c, r);
        }
    } else if (strcmp(m, "POST") != 0) {
        sl__api_set_error(c->res, 405, "use POST");
    } else {
        apply(c, r);
    }
}
