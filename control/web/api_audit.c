/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/api_audit.c - the audit log in the REST API (docs/reference/api.md §5.7): the tail
 * (GET /api/v1/audit), the newest lines of the proxy's audit log that the caller may see and that
 * pass the query's filters (control/web/audittail), each refusal with the sentence of the rule
 * that would allow it; the refusals grouped by environment, host, port, method and reason (GET
 * /api/v1/audit/refusals), each group with that rule ready to apply (control/web/suggest makes
 * both) and whether the caller may; and the admins' list of every sandbox.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/log.h"
#include "base/mem.h"
#include "control/env/environment.h"
#include "control/web/api.h"
#include "control/web/api_int.h"
#include "control/web/audittail.h"
#include "control/web/suggest.h"

#define REFUSALS_PATH "/api/v1/audit/refusals"

/* An environment a line names, looked up once per call. */
struct env_seen {
    /* Its name; NULL when the key is no id of an environment that exists. Owned. */
    char *name;
    /* The caller may change it (admins global environments, owners theirs). */
    bool may_change;
    /* Its stored egress, NULL when its network is off. Owned. */
    char *egress;
    /* Its suggestions, made when the first refusal needs one (NULL before). */
    struct sl_suggest *sg;
};

/* One scan of the log for one request. */
struct scan {
    struct sl__api_call *c;
    const struct sl_audittail_filter *filter;
    /* Environment keys already looked up: {"<key>": index into envs} (owned). */
    json_t *index;
    struct env_seen *envs;
    size_t n_envs;
    /* The time of the oldest line looked at (owned; NULL before the first). */
    json_t *scanned_to;
    /* The tail: the lines kept (owned). */
    json_t *entries;
    /* The refusals: {"<group key>": group} and the lines of groups past the tracked ones. */
    json_t *groups;
    uint64_t lines;
    uint64_t untracked;
    int rc;
};

static const char *text_or_null(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static void scan_finish(struct scan *t)
{
    for (size_t i = 0; i < t->n_envs; i++) {
        sl_free(t->envs[i].name);
        sl_free(t->envs[i].egress);
        sl_suggest_destroy(t->envs[i].sg);
    }
    sl_free(t->envs);
    json_decref(t->index);
    json_decref(t->scanned_to);
    json_decref(t->entries);
    json_decref(t->groups);
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? sl_strdup(s) : NULL;
}

/* The environment the proxy's audit lines name by `key` (the snapshot's key: the id), looked up
 * once; NULL when `key` is NULL or out of memory (t->rc set). Borrowed from t. */
static struct env_seen *env_of(struct scan *t, const char *key)
{
    json_t *at;
    struct env_seen *grown;
    struct env_seen *e;
    struct sl_env_row row;

    if (key == NULL) {
        return NULL;
    }
    at = json_object_get(t->index, key);
    if (at != NULL) {
        return &t->envs[json_integer_value(at)];
    }
    grown = sl_realloc(t->envs, (t->n_envs + 1) * sizeof(*grown));
    if (grown == NULL) {
        t->rc = SL_ENOMEM;
        return NULL;
    }
    t->envs = grown;
    e = &t->envs[t->n_envs];
    memset(e, 0, sizeof(*e));
    memset(&row, 0, sizeof(row));
    /* Misses are kept too (name NULL): a deleted environment is looked up once, and so is
     * another user's, which is private also to an admin reading the lines (§5.1): its id shows,
     * never its name nor what it allows. */
    if (sl__api_is_uuid_shaped(key) && sl_store_env_get(t->c->api->store, key, &row) == 0
        && (row.scope == SL_SCOPE_GLOBAL || strcmp(row.owner_id, t->c->user.id) == 0)) {
        e->name = dup_or_null(row.name);
        e->egress = row.network ? dup_or_null(row.egress_json) : NULL;
        e->may_change = row.scope == SL_SCOPE_GLOBAL ? t->c->user.is_admin
                                                     : strcmp(row.owner_id, t->c->user.id) == 0;
        if (e->name == NULL || (row.network && row.egress_json != NULL && e->egress == NULL)) {
            t->rc = SL_ENOMEM;
        }
    }
    sl_env_row_finish(&row);
    if (t->rc < 0 || json_object_set_new(t->index, key, json_integer((json_int_t)t->n_envs)) != 0) {
        sl_free(e->name);
        sl_free(e->egress);
        t->rc = SL_ENOMEM;
        return NULL;
    }
    t->n_envs++;
    return e;
}

/* The rule that would allow the refusal `line` of `e` (control/web/suggest), or NULL: no
 * refusal a rule answers, allowed by now, an environment that no longer exists, or out of memory
 * (t->rc set). A new reference. */
static json_t *suggestion_of(struct scan *t, struct env_seen *e, const json_t *line)
{
    const char *key = json_string_value(json_object_get(line, "environment"));
    json_t *s = NULL;

    if (e == NULL || e->name == NULL || key == NULL
        || strcmp(text_or_null(line, "decision") != NULL ? text_or_null(line, "decision") : "",
                  "deny")
                   != 0) {
        return NULL;
    }
    if ((e->sg == NULL && sl_suggest_create(key, e->egress, &e->sg) != 0)
        || sl_suggest_line(e->sg, line, &s) != 0) {
        t->rc = SL_ENOMEM;
        return NULL;
    }
    return s;
}

/* Admins see every line; others the lines of the sandboxes they created (a client id the
 * manager knows as theirs). Static clients are admins' (§5.1b). */
bool sl__api_may_see_line(const struct sl__api_call *c, const json_t *line)
{
    const char *client = json_string_value(json_object_get(line, "client"));
    const char *owner;

    if (c->user.is_admin) {
        return true;
    }
    if (client == NULL || c->owners == NULL) {
        return false;
    }
    owner = json_string_value(json_object_get(c->owners, client));
    return owner != NULL && strcmp(owner, c->user.id) == 0;
}

/* Parses one line the caller may see and that passes the filter: the line with
 * "environment_name" when its environment exists, its environment in `*env`, or NULL (`*take`
 * says whether to go on). */
static json_t *visible_line(struct scan *t, const char *line, size_t n,
                            enum sl_audittail_take *take, struct env_seen **env)
{
    json_t *entry = json_loadb(line, n, JSON_REJECT_DUPLICATES, NULL);
    struct env_seen *e;

    *take = SL_AUDITTAIL_SKIP;
    *env = NULL;
    if (t->rc < 0) {
        json_decref(entry);
        *take = SL_AUDITTAIL_STOP;
        return NULL;
    }
    if (!json_is_object(entry)) {
        json_decref(entry);
        return NULL;
    }
    if (json_is_string(json_object_get(entry, "ts"))) {
        json_decref(t->scanned_to);
        t->scanned_to = json_incref(json_object_get(entry, "ts"));
    }
    if (sl_audittail_filter_is_past(t->filter, entry)) {
        json_decref(entry);
        *take = SL_AUDITTAIL_STOP;
        return NULL;
    }
    if (!sl__api_may_see_line(t->c, entry)) {
        json_decref(entry);
        return NULL;
    }
    e = env_of(t, json_string_value(json_object_get(entry, "environment")));
    if (t->rc < 0 || !sl_audittail_filter_match(t->filter, entry, e != NULL ? e->name : NULL)) {
        json_decref(entry);
        *take = t->rc < 0 ? SL_AUDITTAIL_STOP : SL_AUDITTAIL_SKIP;
        return NULL;
    }
    if (e != NULL && e->name != NULL
        && json_object_set_new(entry, "environment_name", json_string(e->name)) < 0) {
        json_decref(entry);
        t->rc = SL_ENOMEM;
        *take = SL_AUDITTAIL_STOP;
        return NULL;
    }
    *env = e;
    return entry;
}

/* The 422 of a query parameter: {"message":"PARAM: WHY","errors":[{"field":PARAM,"message":"must
 * be WHY"}]}. */
static void set_bad_param(struct sl__api_call *c, const char *param, const char *why)
{
    char message[160];
    char field[160];

    (void)snprintf(message, sizeof(message), "%s: %s", param, why);
    (void)snprintf(field, sizeof(field), "must be %s", why);
    sl__api_set_json(c->res, 422,
                     json_pack("{s:s,s:[{s:s,s:s}]}", "message", message, "errors", "field", param,
                               "message", field));
}

/* The filters of the query into `f` (zeroed by the caller). False with the 422 set. */
static bool parse_filter(struct sl__api_call *c, struct sl_audittail_filter *f)
{
    /* One byte more than a value may have: a longer one does not fit and is refused. */
    char value[SL_AUDITTAIL_FILTER_VALUE_MAX + 2];
    const char *why = "";
    const char *param = NULL;

    for (size_t i = 0; sl_audittail_filter_params[i] != NULL; i++) {
        int rc;

        param = sl_audittail_filter_params[i];
        rc = sl__api_query_get(c->req->query, param, value, sizeof(value));
        if (rc == SL_ENOTFOUND) {
            continue;
        }
        if (rc < 0) {
            why = strcmp(param, "since") == 0 || strcmp(param, "until") == 0
                          ? "an RFC 3339 UTC time such as 2026-11-30T02:00:00Z"
                          : "at most 512 bytes without control characters";
        }
        if (rc < 0 || sl_audittail_filter_set(f, param, value, &why) < 0) {
            set_bad_param(c, param, why);
            return false;
        }
    }
    if (sl_audittail_filter_check(f, &param, &why) < 0) {
        set_bad_param(c, param, why);
        return false;
    }
    return true;
}

/* Reads the log for `t` (t->c, t->filter set) with `fn`, at most `limit` lines counted. Returns
 * true with `*cut` set, or false with the answer set (t is finished by the caller). */
static bool read_log(struct scan *t, size_t limit, sl_audittail_line_fn *fn, bool *cut)
{
    struct sl__api_call *c = t->c;
    int rc;

    *cut = false;
    t->index = json_object();
    if (t->index == NULL) {
        sl__api_set_internal(c->res, "reading the audit log", SL_ENOMEM);
        return false;
    }
    rc = c->api->audit_log == NULL
                 ? 0
                 : sl_audittail_read(c->api->audit_log, limit, SL_AUDITTAIL_LINE_MAX,
                                     SL_AUDITTAIL_BUDGET_BYTES, fn, t, cut);
    if (rc == SL_ENOMEM || t->rc == SL_ENOMEM) {
        sl__api_set_internal(c->res, "reading the audit log", SL_ENOMEM);
        return false;
    }
    if (rc < 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"cannot read the audit log\" path=\"%s\" err=%s",
               c->api->audit_log, sl_strerror(rc));
        sl__api_set_error(c->res, 500, "the audit log cannot be read; see the control plane's log");
        return false;
    }
    return true;
}

/* ---- the audit tail (GET /api/v1/audit) ------------------------------------------------- */

static enum sl_audittail_take on_tail_line(void *arg, const char *line, size_t n)
{
    struct scan *t = arg;
    char hint[1024];
    struct env_seen *e;
    enum sl_audittail_take take;
    json_t *entry = visible_line(t, line, n, &take, &e);
    json_t *s;
    int len = 0;

    if (entry == NULL) {
        return take;
    }
    s = suggestion_of(t, e, entry);
    if (s != NULL) {
        len = sl_suggest_sentence(s, e->name, hint, sizeof(hint));
        json_decref(s);
    }
    if (len == SL_ENOMEM || t->rc < 0
        || (len > 0 && json_object_set_new(entry, "suggestion", json_string(hint)) < 0)
        || json_array_append_new(t->entries, entry) < 0) {
        t->rc = SL_ENOMEM;
        return SL_AUDITTAIL_STOP;
    }
    return SL_AUDITTAIL_COUNT;
}

_Static_assert(SL_AUDITTAIL_MAX == 500, "the 422 message of audit_tail() names 500");

static void audit_tail(struct sl__api_call *c)
{
    char text[16] = "";
    unsigned long limit = SL_AUDITTAIL_DEFAULT;
    struct sl_audittail_filter filter;
    struct scan t;
    bool cut = false;
    int rc = sl__api_query_get(c->req->query, "limit", text, sizeof(text));

    if (rc == 0) {
        char *end = NULL;

        limit = strtoul(text, &end, 10);
        if (text[0] < '0' || text[0] > '9' || end == NULL || *end != '\0' || limit == 0
            || limit > SL_AUDITTAIL_MAX) {
            rc = SL_EINVAL;
        }
    } else if (rc == SL_ENOTFOUND) {
        rc = 0;
    }
    if (rc < 0) {
        set_bad_param(c, "limit", "a whole number from 1 to 500");
        return;
    }
    memset(&filter, 0, sizeof(filter));
    if (!parse_filter(c, &filter)) {
        return;
    }
    memset(&t, 0, sizeof(t));
    t.c = c;
    t.filter = &filter;
    t.entries = json_array();
    if (t.entries == NULL) {
        sl__api_set_internal(c->res, "reading the audit log", SL_ENOMEM);
    } else if (read_log(&t, limit, on_tail_line, &cut)) {
        sl__api_set_json(c->res, 200,
                         json_pack("{s:O,s:b,s:b,s:O}", "entries", t.entries, "all",
                                   c->user.is_admin, "truncated", cut, "scanned_to",
                                   t.scanned_to != NULL ? t.scanned_to : json_null()));
    }
    scan_finish(&t);
}

/* ---- refusals grouped (GET /api/v1/audit/refusals) -------------------------------------- */

/* Counts the refusal `line` into its group: {"environment": KEY, "host", "port", "method",
 * "reason", "count", "first", "last", "_line": the newest line}. */
static int group_line(struct scan *t, json_t *line)
{
    json_t *key = json_pack("[s?,s?,O?,s?,s?]", text_or_null(line, "environment"),
                            text_or_null(line, "host"), json_object_get(line, "port"),
                            text_or_null(line, "method"), text_or_null(line, "reason"));
    char *text = key != NULL ? json_dumps(key, JSON_COMPACT) : NULL;
    const char *ts = text_or_null(line, "ts");
    json_t *g;
    int rc = 0;

    json_decref(key);
    SL_ENSURE(text != NULL, SL_ENOMEM);
    t->lines++;
    g = json_object_get(t->groups, text);
    if (g == NULL && json_object_size(t->groups) >= SL_AUDITTAIL_GROUPS_TRACKED) {
        t->untracked++;
    } else if (g == NULL) {
        g = json_pack("{s:s?,s:s?,s:O?,s:s?,s:s?,s:i,s:s?,s:s?,s:O}", "environment",
                      text_or_null(line, "environment"), "host", text_or_null(line, "host"), "port",
                      json_object_get(line, "port"), "method", text_or_null(line, "method"),
                      "reason", text_or_null(line, "reason"), "count", 1, "first", ts, "last", ts,
                      "_line", line);
        rc = g != NULL && json_object_set_new(t->groups, text, g) == 0 ? 0 : SL_ENOMEM;
    } else {
        const char *first = text_or_null(g, "first");
        const char *last = text_or_null(g, "last");

        rc = json_integer_set(json_object_get(g, "count"),
                              json_integer_value(json_object_get(g, "count")) + 1);
        /* Lines come newest first, nearly: keep the extremes. */
        if (rc == 0 && ts != NULL && (first == NULL || strcmp(ts, first) < 0)) {
            rc = json_object_set_new(g, "first", json_string(ts));
        }
        if (rc == 0 && ts != NULL && (last == NULL || strcmp(ts, last) > 0)) {
            rc = json_object_set_new(g, "last", json_string(ts));
        }
        rc = rc == 0 ? 0 : SL_ENOMEM;
    }
    sl_free(text);
    return rc;
}

static enum sl_audittail_take on_refusal_line(void *arg, const char *line, size_t n)
{
    struct scan *t = arg;
    struct env_seen *e;
    enum sl_audittail_take take;
    json_t *entry = visible_line(t, line, n, &take, &e);
    int rc;

    if (entry == NULL) {
        return take;
    }
    rc = group_line(t, entry);
    json_decref(entry);
    if (rc < 0) {
        t->rc = rc;
        return SL_AUDITTAIL_STOP;
    }
    return SL_AUDITTAIL_COUNT;
}

/* Most refusals first; then the most recent; then by key, so that the order is stable. */
static int compare_groups(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a;
    const json_t *y = *(json_t *const *)b;
    json_int_t cx = json_integer_value(json_object_get(x, "count"));
    json_int_t cy = json_integer_value(json_object_get(y, "count"));
    const char *lx = text_or_null(x, "last");
    const char *ly = text_or_null(y, "last");
    int by_last = strcmp(ly != NULL ? ly : "", lx != NULL ? lx : "");

    if (cx != cy) {
        return cx > cy ? -1 : 1;
    }
    if (by_last != 0) {
        return by_last;
    }
    return strcmp(text_or_null(x, "_key"), text_or_null(y, "_key"));
}

/* Completes group `g` for the answer: the environment as {id, name}, the rule, the sentence and
 * whether the caller may apply it; its private members removed. */
static int finish_group(struct scan *t, json_t *g)
{
    const char *key = text_or_null(g, "environment");
    struct env_seen *e = env_of(t, key);
    json_t *s = suggestion_of(t, e, json_object_get(g, "_line"));
    char hint[1024] = "";
    int len = 0;
    int rc = t->rc;

    if (s != NULL) {
        len = sl_suggest_sentence(s, e->name, hint, sizeof(hint));
    }
    if (rc == 0 && len == SL_ENOMEM) {
        rc = SL_ENOMEM;
    }
    if (rc == 0
        && (json_object_set_new(g, "environment",
                                key == NULL ? json_null()
                                            : json_pack("{s:s,s:s?}", "id", key, "name",
                                                        e != NULL ? e->name : NULL))
                    != 0
            || json_object_set(g, "rule", s != NULL ? json_object_get(s, "rule") : json_null()) != 0
            || json_object_set(g, "extends",
                               s != NULL && json_object_get(s, "extends") != NULL
                                       ? json_object_get(s, "extends")
                                       : json_null())
                       != 0
            || json_object_set_new(g, "suggestion", len > 0 ? json_string(hint) : json_null()) != 0
            || json_object_set_new(g, "can_apply", json_boolean(e != NULL && e->may_change))
                       != 0)) {
        rc = SL_ENOMEM;
    }
    json_decref(s);
    (void)json_object_del(g, "_line");
    (void)json_object_del(g, "_key");
    return rc;
}

/* The groups of t, sorted, the first SL_AUDITTAIL_GROUPS_MAX completed, into `*out` (a new
 * array); `*left_out` counts the refusals of the others. */
static int sorted_groups(struct scan *t, json_t **out, uint64_t *left_out)
{
    size_t n = json_object_size(t->groups);
    json_t **v = sl_calloc(n + 1, sizeof(*v));
    json_t *list = json_array();
    const char *key;
    json_t *g;
    size_t i = 0;
    int rc = v != NULL && list != NULL ? 0 : SL_ENOMEM;

    *out = NULL;
    *left_out = t->untracked;
    json_object_foreach(t->groups, key, g)
    {
        if (rc == 0 && json_object_set_new(g, "_key", json_string(key)) != 0) {
            rc = SL_ENOMEM;
        }
        if (v != NULL) {
            v[i++] = g;
        }
    }
    if (rc == 0) {
        qsort(v, n, sizeof(*v), compare_groups);
    }
    for (i = 0; rc == 0 && i < n; i++) {
        if (i >= SL_AUDITTAIL_GROUPS_MAX) {
            *left_out += (uint64_t)json_integer_value(json_object_get(v[i], "count"));
            continue;
        }
        rc = finish_group(t, v[i]);
        if (rc == 0 && json_array_append(list, v[i]) != 0) {
            rc = SL_ENOMEM;
        }
    }
    sl_free(v);
    if (rc < 0) {
        json_decref(list);
        return rc;
    }
    *out = list;
    return 0;
}

static void audit_refusals(struct sl__api_call *c)
{
    struct sl_audittail_filter filter;
    struct scan t;
    json_t *groups = NULL;
    uint64_t left_out = 0;
    bool cut = false;
    int rc;

    memset(&filter, 0, sizeof(filter));
    if (!parse_filter(c, &filter)) {
        return;
    }
    if (filter.decision[0] != '\0' && strcmp(filter.decision, "deny") != 0) {
        set_bad_param(c, "decision", "deny (the refusals are the lines with decision deny)");
        return;
    }
    (void)snprintf(filter.decision, sizeof(filter.decision), "deny");
    memset(&t, 0, sizeof(t));
    t.c = c;
    t.filter = &filter;
    t.groups = json_object();
    if (t.groups == NULL) {
        sl__api_set_internal(c->res, "reading the audit log", SL_ENOMEM);
    } else if (read_log(&t, SIZE_MAX, on_refusal_line, &cut)) {
        rc = sorted_groups(&t, &groups, &left_out);
        if (rc < 0) {
            sl__api_set_internal(c->res, "grouping refusals", rc);
        } else {
            sl__api_set_json(c->res, 200,
                             json_pack("{s:o,s:I,s:I,s:b,s:b,s:O}", "groups", groups, "lines",
                                       (json_int_t)t.lines, "left_out", (json_int_t)left_out, "all",
                                       c->user.is_admin, "truncated", cut, "scanned_to",
                                       t.scanned_to != NULL ? t.scanned_to : json_null()));
        }
    }
    scan_finish(&t);
}

void sl__api_route_audit(struct sl__api_call *c, const char *path)
{
    if (strcmp(c->req->method, "GET") != 0) {
        sl__api_set_error(c->res, 405, "use GET");
    } else if (strcmp(path, REFUSALS_PATH) == 0) {
        audit_refusals(c);
    } else {
        audit_tail(c);
    }
}

/* GET /api/v1/sandboxes: the caller's open sandboxes in every repository (d->repo empty). */
void sl__api_list_all_sandboxes(struct sl__api_call *c)
{
    struct sl__api_defer *d = &c->res->defer;

    if (strcmp(c->req->method, "GET") != 0) {
        sl__api_set_error(c->res, 405, "use GET");
        return;
    }
    if (!sl__api_sandboxes_enabled(c)) {
        return;
    }
    (void)snprintf(d->user_id, sizeof(d->user_id), "%s", c->user.id);
    d->any_sandbox = c->user.is_admin;
    d->repo[0] = '\0';
    d->kind = SL__API_DEFER_LIST;
}
