/* SPDX-License-Identifier: Apache-2.0 */
#include "control/web/suggest.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/mem.h"
#include "policy/decision.h"
#include "policy/host.h"
#include "policy/snapshot.h"
#include "policy/validate.h"

#define METHODS_MAX    32
#define METHOD_MAX     32
#define ENV_ID_MAX     128
#define TS_MAX         40
#define HOST_PORT_SIZE (SL_HOST_NAME_MAX + 8)

/* The refusals a suggestion answers, as bits. */
enum {
    WOULD_HOST = 1,
    WOULD_PORT = 2,
    WOULD_METHOD = 4,
};

/* One host and port the environment's sandboxes were refused (or let out in observe). */
struct entry {
    struct sl_host host;
    uint16_t port;
    char methods[METHODS_MAX][METHOD_MAX + 1];
    size_t n_methods;
    /* A method beyond METHODS_MAX was seen: the rule proposed takes every method. */
    bool every_method;
    /* Only tunnels were seen (CONNECT lines), no request inside. */
    bool requests;
    uint64_t count;
    uint64_t observed;
    uint64_t refused;
    unsigned would;
    char last[TS_MAX];
};

struct sl_suggest {
    char env_id[ENV_ID_MAX + 1];
    /* What the environment allows now: a snapshot of its rules (no credential) and its one
     * client; NULL when it allows nothing. */
    struct sl_snapshot *snap;
    const struct sl_client *client;
    /* The stored rules, for the methods of the rule that refused one (borrowed from `stored`). */
    json_t *stored;
    struct entry *entries;
    size_t n;
    /* "host:port" -> index into entries. */
    json_t *index;
    uint64_t lines;
    uint64_t left_out;
};

/* The rules of the stored egress as a snapshot of one environment and one client that any
 * address identifies: credentials are left out (only what a rule lets through matters here). */
static struct sl_snapshot *policy_of(json_t *stored)
{
    json_t *rules = json_array();
    json_t *doc;
    json_t *r;
    size_t i;
    char *text;
    struct sl_snapshot *snap = NULL;

    json_array_foreach(json_object_get(stored, "rules"), i, r)
    {
        json_t *rule = json_pack("{s:O}", "host", json_object_get(r, "host"));

        if (rule != NULL && json_array_size(json_object_get(r, "methods")) > 0) {
            (void)json_object_set(rule, "methods", json_object_get(r, "methods"));
        }
        if (rule != NULL && json_object_get(r, "tls") != NULL) {
            (void)json_object_set(rule, "tls", json_object_get(r, "tls"));
        }
        if (rule == NULL || json_array_append_new(rules, rule) != 0) {
            json_decref(rules);
            return NULL;
        }
    }
    doc = json_pack("{s:i, s:{s:{s:O, s:o}}, s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}]}", "version", 1,
                    "environments", "e", "default", json_object_get(stored, "default"), "rules",
                    rules, "clients", "id", "v4", "cidr", "0.0.0.0/0", "environment", "e", "id",
                    "v6", "cidr", "::/0", "environment", "e");
    text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    if (text != NULL && sl_snapshot_parse(text, strlen(text), &snap, NULL) != 0) {
        snap = NULL;
    }
    sl_free(text);
    json_decref(doc);
    return snap;
}

int sl_suggest_create(const char *env_id, const char *egress_json, struct sl_suggest **out)
{
    struct sl_suggest *sg = sl_calloc(1, sizeof(*sg));

    *out = NULL;
    SL_ENSURE(sg != NULL, SL_ENOMEM);
    (void)snprintf(sg->env_id, sizeof(sg->env_id), "%s", env_id);
    sg->index = json_object();
    if (sg->index == NULL) {
        sl_suggest_destroy(sg);
        return SL_ENOMEM;
    }
    if (egress_json != NULL) {
        sg->stored = json_loads(egress_json, JSON_REJECT_DUPLICATES, NULL);
        sg->snap = sg->stored != NULL ? policy_of(sg->stored) : NULL;
        sg->client = sg->snap != NULL ? sl_snapshot_find_client(sg->snap, "v4") : NULL;
    }
    *out = sg;
    return 0;
}

void sl_suggest_destroy(struct sl_suggest *sg)
{
    if (sg == NULL) {
        return;
    }
    sl_snapshot_unref(sg->snap);
    json_decref(sg->stored);
    json_decref(sg->index);
    sl_free(sg->entries);
    sl_free(sg);
}

static bool text_is(const json_t *v, const char *s)
{
    return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

/* The refusal a line stands for (its bit), or 0 when it is no line for suggestions. */
static unsigned would_of(const json_t *line, bool *observed)
{
    const json_t *reason;

    *observed = json_is_true(json_object_get(line, "observed"));
    if (text_is(json_object_get(line, "decision"), "allow")) {
        reason = *observed ? json_object_get(line, "would_deny") : NULL;
    } else if (text_is(json_object_get(line, "decision"), "deny")) {
        reason = json_object_get(line, "reason");
    } else {
        return 0;
    }
    if (text_is(reason, "host-not-allowed")) {
        return WOULD_HOST;
    }
    if (text_is(reason, "port-not-allowed")) {
        return WOULD_PORT;
    }
    if (text_is(reason, "method-not-allowed")) {
        return WOULD_METHOD;
    }
    return 0;
}

/* The entry of `host`:`port`, made when it is new; NULL past the bound (or out of memory). */
static struct entry *entry_for(struct sl_suggest *sg, const struct sl_host *host, uint16_t port)
{
    char key[HOST_PORT_SIZE];
    json_t *at;
    struct entry *grown;

    (void)snprintf(key, sizeof(key), "%s:%u", host->name, (unsigned)port);
    at = json_object_get(sg->index, key);
    if (at != NULL) {
        return &sg->entries[json_integer_value(at)];
    }
    if (sg->n >= SL_SUGGEST_HOSTS_MAX) {
        return NULL;
    }
    grown = sl_realloc(sg->entries, (sg->n + 1) * sizeof(*grown));
    if (grown == NULL) {
        return NULL;
    }
    sg->entries = grown;
    if (json_object_set_new(sg->index, key, json_integer((json_int_t)sg->n)) != 0) {
        return NULL;
    }
    memset(&sg->entries[sg->n], 0, sizeof(sg->entries[sg->n]));
    sg->entries[sg->n].host = *host;
    sg->entries[sg->n].port = port;
    return &sg->entries[sg->n++];
}

static void add_method(struct entry *e, const char *m)
{
    for (size_t i = 0; i < e->n_methods; i++) {
        if (strcmp(e->methods[i], m) == 0) {
            return;
        }
    }
    if (e->n_methods == METHODS_MAX) {
        e->every_method = true;
        return;
    }
    (void)snprintf(e->methods[e->n_methods++], METHOD_MAX + 1, "%s", m);
}

/* What a line for suggestions says: its host, port and method (NULL or "CONNECT": a tunnel), its
 * time, whether it was observed and the refusal it stands for. False when it is no line for
 * suggestions of sg's environment. */
struct seen {
    struct sl_host host;
    uint16_t port;
    const char *method;
    const char *ts;
    bool observed;
    unsigned would;
};

static bool read_line(const struct sl_suggest *sg, const json_t *line, struct seen *out)
{
    const char *env = json_string_value(json_object_get(line, "environment"));
    const char *host = json_string_value(json_object_get(line, "host"));
    json_int_t port = json_integer_value(json_object_get(line, "port"));

    if (env == NULL || strcmp(env, sg->env_id) != 0 || host == NULL || port < 1 || port > 65535) {
        return false;
    }
    out->would = would_of(line, &out->observed);
    if (out->would == 0 || sl_host_normalize(sl_slice_str(host), 0, &out->host, NULL) != 0) {
        return false;
    }
    out->port = (uint16_t)port;
    out->method = json_string_value(json_object_get(line, "method"));
    out->ts = json_string_value(json_object_get(line, "ts"));
    return out->method == NULL || strcmp(out->method, "CONNECT") == 0
           || sl_policy_method_check(out->method, strlen(out->method)) == SL_POLICY_METHOD_OK;
}

/* Counts the line `l` into `e`. */
static void count_into(struct entry *e, const struct seen *l)
{
    if (l->method != NULL && strcmp(l->method, "CONNECT") != 0) {
        e->requests = true;
        add_method(e, l->method);
    }
    if (e->count == 0 && l->ts != NULL) {
        (void)snprintf(e->last, sizeof(e->last), "%s", l->ts);
    }
    e->count++;
    e->observed += l->observed;
    e->refused += !l->observed;
    e->would |= l->would;
}

bool sl_suggest_add(struct sl_suggest *sg, const json_t *line)
{
    struct seen l;
    struct entry *e;

    if (!read_line(sg, line, &l)) {
        return false;
    }
    e = entry_for(sg, &l.host, l.port);
    if (e == NULL) {
        sg->left_out++;
        return false;
    }
    count_into(e, &l);
    sg->lines++;
    return true;
}

/* Does the environment let `method` (NULL: a tunnel) to `e`'s host and port out now? The
 * rule that decided goes to `*rule`. */
static bool allowed_now(const struct sl_suggest *sg, const struct entry *e, const char *method,
                        const char **rule)
{
    struct sl_request_view v = { &e->host, e->port, method, true, NULL };
    struct sl_decision d;

    *rule = NULL;
    if (sg->client == NULL) {
        return false;
    }
    sl_policy_decide(sg->snap, sg->client, &v, 0, &d);
    *rule = d.rule;
    return d.allow;
}

/* The stored methods of the rule whose host is `text` (a `*` pattern that refused a method). */
static json_t *methods_of_rule(const struct sl_suggest *sg, const char *text)
{
    json_t *r;
    size_t i;

    json_array_foreach(json_object_get(sg->stored, "rules"), i, r)
    {
        if (text_is(json_object_get(r, "host"), text)) {
            return json_object_get(r, "methods");
        }
    }
    return NULL;
}

static int append_string(json_t *arr, const char *s)
{
    for (size_t i = 0; i < json_array_size(arr); i++) {
        if (text_is(json_array_get(arr, i), s)) {
            return 0;
        }
    }
    return json_array_append_new(arr, json_string(s)) == 0 ? 0 : SL_ENOMEM;
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

/* Sorts an array of strings in place. */
static int sort_strings(json_t *arr)
{
    size_t n = json_array_size(arr);
    json_t **v;

    if (n < 2) {
        return 0;
    }
    v = sl_calloc(n, sizeof(*v));
    SL_ENSURE(v != NULL, SL_ENOMEM);
    for (size_t i = 0; i < n; i++) {
        v[i] = json_incref(json_array_get(arr, i));
    }
    qsort(v, n, sizeof(*v), compare_strings);
    json_array_clear(arr);
    for (size_t i = 0; i < n; i++) {
        if (json_array_append_new(arr, v[i]) != 0) {
            for (size_t j = i + 1; j < n; j++) {
                json_decref(v[j]);
            }
            sl_free(v);
            return SL_ENOMEM;
        }
    }
    sl_free(v);
    return 0;
}

/* The rule text of a host and port: a rule without a port covers 443 and 80. */
static void rule_host(char *out, size_t cap, const char *host, uint16_t port)
{
    if (port == 443 || port == 80) {
        (void)snprintf(out, cap, "%s", host);
    } else {
        (void)snprintf(out, cap, "%s:%u", host, (unsigned)port);
    }
}

static json_t *would_list(unsigned would)
{
    json_t *arr = json_array();

    if (arr != NULL && (would & WOULD_HOST) != 0) {
        (void)json_array_append_new(arr, json_string("host-not-allowed"));
    }
    if (arr != NULL && (would & WOULD_PORT) != 0) {
        (void)json_array_append_new(arr, json_string("port-not-allowed"));
    }
    if (arr != NULL && (would & WOULD_METHOD) != 0) {
        (void)json_array_append_new(arr, json_string("method-not-allowed"));
    }
    return arr;
}

/* The suggestion of `e`, or NULL in `*out` when the environment allows it all by now. `*decider`
 * (when not NULL) is set to the host of the rule that decides `e`'s host and port now (NULL: none),
 * borrowed from sg. */
static int suggest_entry(const struct sl_suggest *sg, const struct entry *e, json_t **out,
                         const char **decider)
{
    char host[HOST_PORT_SIZE];
    const char *rule = NULL;
    json_t *methods;
    bool every = e->every_method || !e->requests;
    bool tunnel_ok = allowed_now(sg, e, NULL, &rule);

    *out = NULL;
    if (decider != NULL) {
        *decider = rule;
    }
    if (!e->requests && tunnel_ok) {
        return 0;
    }
    methods = json_array();
    SL_ENSURE(methods != NULL, SL_ENOMEM);
    for (size_t i = 0; i < e->n_methods && !every; i++) {
        const char *r2;

        if (!allowed_now(sg, e, e->methods[i], &r2) && append_string(methods, e->methods[i]) != 0) {
            json_decref(methods);
            return SL_ENOMEM;
        }
    }
    if (!every && json_array_size(methods) == 0) {
        json_decref(methods);
        return 0;
    }
    if (every) {
        json_array_clear(methods);
    } else if (rule != NULL && strchr(rule, '*') != NULL) {
        /* The new exact rule outranks the pattern for this host: keep what the pattern let out. */
        json_t *kept = methods_of_rule(sg, rule);

        for (size_t i = 0; i < json_array_size(kept); i++) {
            if (append_string(methods, json_string_value(json_array_get(kept, i))) != 0) {
                json_decref(methods);
                return SL_ENOMEM;
            }
        }
    }
    if (sort_strings(methods) != 0) {
        json_decref(methods);
        return SL_ENOMEM;
    }
    rule_host(host, sizeof(host), e->host.name, e->port);
    *out = json_pack("{s:{s:s, s:o}, s:I, s:I, s:I, s:s, s:o}", "rule", "host", host, "methods",
                     methods, "count", (json_int_t)e->count, "observed", (json_int_t)e->observed,
                     "refused", (json_int_t)e->refused, "last_seen", e->last, "would_deny",
                     would_list(e->would));
    SL_ENSURE(*out != NULL, SL_ENOMEM);
    if (rule != NULL && strchr(rule, '*') == NULL
        && json_object_set_new(*out, "_exact", json_true()) != 0) {
        /* A rule for exactly this host decides it: the suggestion extends that rule (applying
         * merges them) and never joins a wildcard, which that rule would outrank. */
        json_decref(*out);
        *out = NULL;
        return SL_ENOMEM;
    }
    return 0;
}

/* The domain a DNS name's subdomains share (the name without its first label), or NULL when it
 * has fewer than two labels left (never `*.com`) or is an IP address. */
static const char *parent_of(const struct entry *e)
{
    const char *dot = strchr(e->host.name, '.');

    if (e->host.kind != SL_HOST_DNS || dot == NULL || strchr(dot + 1, '.') == NULL) {
        return NULL;
    }
    return dot + 1;
}

/* The sort key of a host: its labels from the last to the first, so that a domain's hosts stay
 * together (api.github.com -> com.github.api). */
static void domain_key(const char *host, char *out, size_t cap)
{
    size_t n = strlen(host);
    size_t w = 0;
    size_t end = n;

    for (size_t i = n; i-- > 0 && w + 1 < cap;) {
        if (host[i] == '.' || i == 0) {
            size_t start = host[i] == '.' ? i + 1 : 0;

            for (size_t k = start; k < end && w + 1 < cap; k++) {
                out[w++] = host[k];
            }
            if (i > 0 && w + 1 < cap) {
                out[w++] = '.';
            }
            end = i;
        }
    }
    out[w] = '\0';
}

struct item {
    char key[HOST_PORT_SIZE + 8];
    json_t *doc;
};

static int compare_items(const void *a, const void *b)
{
    return strcmp(((const struct item *)a)->key, ((const struct item *)b)->key);
}

/* Merges `add` (a suggestion) into the wildcard suggestion `w`. */
static void merge_into(json_t *w, json_t *add, const char *host)
{
    json_t *wm = json_object_get(json_object_get(w, "rule"), "methods");
    json_t *am = json_object_get(json_object_get(add, "rule"), "methods");
    const char *keys[] = { "count", "observed", "refused" };
    const char *wl = json_string_value(json_object_get(w, "last_seen"));
    const char *al = json_string_value(json_object_get(add, "last_seen"));
    json_t *ww = json_object_get(w, "would_deny");

    if (json_array_size(wm) > 0 && json_array_size(am) == 0) {
        json_array_clear(wm);
        (void)json_object_set_new(w, "_every", json_true());
    } else if (json_object_get(w, "_every") == NULL) {
        for (size_t i = 0; i < json_array_size(am); i++) {
            (void)append_string(wm, json_string_value(json_array_get(am, i)));
        }
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(keys); i++) {
        (void)json_object_set_new(
                w, keys[i],
                json_integer(json_integer_value(json_object_get(w, keys[i]))
                             + json_integer_value(json_object_get(add, keys[i]))));
    }
    if (wl != NULL && al != NULL && strcmp(al, wl) > 0) {
        (void)json_object_set(w, "last_seen", json_object_get(add, "last_seen"));
    }
    for (size_t i = 0; i < json_array_size(json_object_get(add, "would_deny")); i++) {
        (void)append_string(
                ww, json_string_value(json_array_get(json_object_get(add, "would_deny"), i)));
    }
    (void)append_string(json_object_get(w, "hosts"), host);
}

/* Groups the suggestions of `items` whose hosts share a domain and a port into `*.domain`
 * rules (two hosts or more). */
static int group_wildcards(const struct sl_suggest *sg, struct item *items, size_t n,
                           size_t *entry_of)
{
    json_t *groups = json_object();

    SL_ENSURE(groups != NULL, SL_ENOMEM);
    /* Count the hosts of each domain and port. */
    for (size_t i = 0; i < n; i++) {
        const struct entry *e = &sg->entries[entry_of[i]];
        const char *parent = parent_of(e);
        char key[HOST_PORT_SIZE];

        if (parent == NULL || json_object_get(items[i].doc, "_exact") != NULL) {
            continue;
        }
        rule_host(key, sizeof(key), parent, e->port);
        (void)json_object_set_new(
                groups, key, json_integer(json_integer_value(json_object_get(groups, key)) + 1));
    }
    for (size_t i = 0; i < n; i++) {
        const struct entry *e = &sg->entries[entry_of[i]];
        const char *parent = parent_of(e);
        char key[HOST_PORT_SIZE];
        char star[HOST_PORT_SIZE + 2];
        json_t *g;

        if (parent == NULL || json_object_get(items[i].doc, "_exact") != NULL) {
            continue;
        }
        rule_host(key, sizeof(key), parent, e->port);
        g = json_object_get(groups, key);
        if (json_is_integer(g) && json_integer_value(g) >= 2) {
            /* The first host of the domain becomes the wildcard; the others merge into it. */
            json_t *w = items[i].doc;
            json_t *rule = json_object_get(w, "rule");

            (void)snprintf(star, sizeof(star), "*.%s", key);
            (void)json_object_set_new(rule, "host", json_string(star));
            if (json_array_size(json_object_get(rule, "methods")) == 0) {
                (void)json_object_set_new(w, "_every", json_true());
            }
            (void)json_object_set_new(w, "hosts", json_pack("[s]", e->host.name));
            (void)json_object_set(groups, key, w);
        } else if (json_is_object(g)) {
            merge_into(g, items[i].doc, e->host.name);
            json_decref(items[i].doc);
            items[i].doc = NULL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (items[i].doc != NULL) {
            (void)json_object_del(items[i].doc, "_every");
            (void)sort_strings(json_object_get(json_object_get(items[i].doc, "rule"), "methods"));
        }
    }
    json_decref(groups);
    return 0;
}

int sl_suggest_render(const struct sl_suggest *sg, bool wildcards, json_t **out)
{
    struct item *items = sl_calloc(sg->n + 1, sizeof(*items));
    size_t *entry_of = sl_calloc(sg->n + 1, sizeof(*entry_of));
    json_t *list = json_array();
    size_t n = 0;
    int rc = items != NULL && entry_of != NULL && list != NULL ? 0 : SL_ENOMEM;

    *out = NULL;
    for (size_t i = 0; rc == 0 && i < sg->n; i++) {
        json_t *doc = NULL;

        rc = suggest_entry(sg, &sg->entries[i], &doc, NULL);
        if (rc == 0 && doc != NULL) {
            domain_key(sg->entries[i].host.name, items[n].key, sizeof(items[n].key) - 8);
            (void)snprintf(items[n].key + strlen(items[n].key), 8, " %05u",
                           (unsigned)sg->entries[i].port);
            items[n].doc = doc;
            entry_of[n] = i;
            n++;
        }
    }
    if (rc == 0) {
        /* Sorted by domain, the order of entry_of following. */
        for (size_t i = 1; i < n; i++) {
            for (size_t j = i; j > 0 && compare_items(&items[j - 1], &items[j]) > 0; j--) {
                struct item t = items[j];
                size_t e = entry_of[j];

                items[j] = items[j - 1];
                items[j - 1] = t;
                entry_of[j] = entry_of[j - 1];
                entry_of[j - 1] = e;
            }
        }
    }
    if (rc == 0 && wildcards) {
        rc = group_wildcards(sg, items, n, entry_of);
    }
    for (size_t i = 0; i < n; i++) {
        if (items[i].doc != NULL) {
            (void)json_object_del(items[i].doc, "_exact");
        }
        if (items[i].doc != NULL && (rc != 0 || json_array_append_new(list, items[i].doc) != 0)) {
            rc = SL_ENOMEM;
        }
        items[i].doc = NULL;
    }
    if (rc == 0) {
        *out = json_pack("{s:o, s:I, s:I}", "suggestions", list, "lines", (json_int_t)sg->lines,
                         "left_out", (json_int_t)sg->left_out);
        list = NULL;
        rc = *out != NULL ? 0 : SL_ENOMEM;
    }
    json_decref(list);
    sl_free(items);
    sl_free(entry_of);
    return rc;
}

int sl_suggest_line(const struct sl_suggest *sg, const json_t *line, json_t **out)
{
    struct seen l;
    struct entry *e;
    json_t *doc = NULL;
    json_t *rule;
    const char *decider = NULL;
    const char *host;
    int rc;

    *out = NULL;
    if (!read_line(sg, line, &l)) {
        return 0;
    }
    /* The entry of this one line, as if it were the only one seen. */
    e = sl_calloc(1, sizeof(*e));
    SL_ENSURE(e != NULL, SL_ENOMEM);
    e->host = l.host;
    e->port = l.port;
    count_into(e, &l);
    rc = suggest_entry(sg, e, &doc, &decider);
    sl_free(e);
    if (rc < 0 || doc == NULL) {
        return rc;
    }
    rule = json_object_get(doc, "rule");
    host = json_string_value(json_object_get(rule, "host"));
    if (json_array_size(json_object_get(rule, "methods")) == 0) {
        (void)json_object_del(rule, "methods");
    }
    *out = json_pack("{s:O}", "rule", rule);
    /* A rule for exactly this host and port refused the method: applying adds the method to it
     * (a second rule for the host would tie with it and lose on order). */
    if (*out != NULL && decider != NULL && strchr(decider, '*') == NULL
        && strcmp(decider, host) == 0
        && json_object_set_new(*out, "extends", json_string(decider)) != 0) {
        json_decref(*out);
        *out = NULL;
    }
    json_decref(doc);
    return *out != NULL ? 0 : SL_ENOMEM;
}

/* An environment name a sentence can hold: no control characters, quotes or backslashes. */
static bool is_sentence_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 512) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
            return false;
        }
    }
    return true;
}

/* Appends `s` to out (cap bytes, *len used). False when it does not fit. */
static bool append(char *out, size_t cap, size_t *len, const char *s)
{
    size_t n = strlen(s);

    if (n >= cap - *len) {
        return false;
    }
    memcpy(out + *len, s, n);
    *len += n;
    out[*len] = '\0';
    return true;
}

int sl_suggest_sentence(const json_t *suggestion, const char *env_name, char *out, size_t cap)
{
    const json_t *rule = json_object_get(suggestion, "rule");
    const char *extends = json_string_value(json_object_get(suggestion, "extends"));
    const json_t *methods = json_object_get(rule, "methods");
    char *text = NULL;
    size_t len = 0;
    bool ok = true;

    if (cap == 0) {
        return SL_ETOOBIG;
    }
    out[0] = '\0';
    if (!json_is_object(rule) || env_name == NULL || !is_sentence_name(env_name)) {
        return 0;
    }
    if (extends != NULL && json_array_size(methods) > 0) {
        /* to allow it, add "POST" to the methods of {"host":"api.example.com"} in environment
         * ci-python */
        json_t *only = json_pack("{s:s}", "host", extends);

        text = only != NULL ? json_dumps(only, JSON_COMPACT) : NULL;
        json_decref(only);
        SL_ENSURE(text != NULL, SL_ENOMEM);
        ok = append(out, cap, &len, "to allow it, add ");
        for (size_t i = 0; ok && i < json_array_size(methods); i++) {
            const char *m = json_string_value(json_array_get(methods, i));

            ok = (i == 0 || append(out, cap, &len, ", ")) && append(out, cap, &len, "\"")
                 && append(out, cap, &len, m != NULL ? m : "") && append(out, cap, &len, "\"");
        }
        ok = ok && append(out, cap, &len, " to the methods of ") && append(out, cap, &len, text)
             && append(out, cap, &len, " in environment ") && append(out, cap, &len, env_name);
    } else {
        /* to allow it, add {"host":"api.example.com","methods":["POST"]} to environment
         * ci-python */
        text = json_dumps(rule, JSON_COMPACT);
        SL_ENSURE(text != NULL, SL_ENOMEM);
        ok = append(out, cap, &len, "to allow it, add ") && append(out, cap, &len, text)
             && append(out, cap, &len, " to environment ") && append(out, cap, &len, env_name);
    }
    sl_free(text);
    if (!ok) {
        out[0] = '\0';
        return SL_ETOOBIG;
    }
    return (int)len;
}
