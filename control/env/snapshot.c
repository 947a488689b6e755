/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/env/snapshot.c - the snapshot compiler (see snapshot.h): environments, static clients
 * and the caller's extra clients into one document, each checked on its own with the proxy's
 * parser as it goes in, the whole checked again at the end.
 */
#include "control/env/snapshot.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <sodium.h>

#include "base/log.h"
#include "base/mem.h"
#include "policy/snapshot.h"

/* Cap on one opened value: above the proxy's largest (a credential, SL_POLICY_VALUE_MAX), so
 * that an over-long value reaches the proxy's validation and is named there. */
#define PLAIN_MAX ((size_t)64 << 10)

/* Characters of an environment name written to the log. */
#define LOG_NAME_MAX 64

/* One build's state. */
struct build {
    /* Borrowed. */
    const struct sl_secrets *sec;
    /* The caller's report, or a local one; never NULL. */
    struct sl_snapshot_build_report *report;
    /* Scratch for one opened value; wiped after each use. */
    struct sl_buf plain;
    /* The document's "environments" and "clients", borrowed from the document. */
    json_t *envs;
    json_t *clients;
    /* The client ids taken so far (a set), owned. */
    json_t *ids;
    /* The build's time (Unix seconds): environments in observe until later are compiled so. */
    int64_t now;
    /* Each environment and client is checked on its own as it is compiled (the second pass,
     * after the proxy's parser refused the whole document of the first). */
    bool check_each;
};

void sl_snapshot_build_report_finish(struct sl_snapshot_build_report *r)
{
    for (size_t i = 0; i < r->n_drops; i++) {
        sl_free(r->drops[i].env_name);
        sl_free(r->drops[i].subject);
        sl_free(r->drops[i].message);
    }
    sl_free(r->drops);
    memset(r, 0, sizeof(*r));
}

/* Copies free text for a logfmt value inside quotes into `out` (`cap` bytes, cut to fit):
 * quotes, backslashes and control characters become '?', so that a log line stays one line that
 * parses. */
static void log_text(const char *in, char *out, size_t cap)
{
    size_t i = 0;

    for (; i + 1 < cap && in[i] != '\0'; i++) {
        unsigned char ch = (unsigned char)in[i];
        bool plain = ch >= 0x20 && ch <= 0x7e && ch != '"' && ch != '\\';

        out[i] = plain ? in[i] : '?';
    }
    out[i] = '\0';
}

/* An environment name for the log (names are free text), at most LOG_NAME_MAX characters. */
static void log_name(const char *in, char out[LOG_NAME_MAX + 1])
{
    log_text(in, out, LOG_NAME_MAX + 1);
}

static int add_drop(struct build *b, enum sl_snapshot_drop_kind kind, const char *env_id,
                    const char *env_name, const char *subject, const char *message)
{
    struct sl_snapshot_build_report *r = b->report;
    struct sl_snapshot_drop *d;
    struct sl_snapshot_drop *grown = sl_realloc(r->drops, (r->n_drops + 1) * sizeof(*r->drops));

    SL_ENSURE(grown != NULL, SL_ENOMEM);
    r->drops = grown;
    d = &r->drops[r->n_drops];
    memset(d, 0, sizeof(*d));
    d->kind = kind;
    (void)snprintf(d->env_id, sizeof(d->env_id), "%s", env_id);
    d->env_name = sl_strdup(env_name);
    d->subject = subject != NULL ? sl_strdup(subject) : NULL;
    d->message = message != NULL ? sl_strdup(message) : NULL;
    r->n_drops++;
    SL_ENSURE(d->env_name != NULL && (subject == NULL || d->subject != NULL)
                      && (message == NULL || d->message != NULL),
              SL_ENOMEM);
    return 0;
}

/* The text of one drop for people (GET /api/v1/status). */
static void drop_text(const struct sl_snapshot_drop *d, char *out, size_t cap)
{
    const char *subject = d->subject != NULL ? d->subject : "";
    const char *message = d->message != NULL ? d->message : "";

    switch (d->kind) {
    case SL_SNAPSHOT_DROP_RULE:
        (void)snprintf(out, cap,
                       "the credential of the rule for %s does not open (the encryption key "
                       "changed?): the rule is left out",
                       subject);
        return;
    case SL_SNAPSHOT_DROP_CLIENT:
        (void)snprintf(out, cap,
                       "the token of static client %s does not open (the encryption key "
                       "changed?): the client is left out",
                       subject);
        return;
    case SL_SNAPSHOT_DROP_EGRESS:
        (void)snprintf(out, cap,
                       "the stored egress policy is missing or damaged: the environment is "
                       "compiled as deny-all");
        return;
    case SL_SNAPSHOT_DROP_ENV_INVALID:
        (void)snprintf(out, cap,
                       "the stored environment is refused by the proxy's validation (%s): it is "
                       "compiled as deny-all",
                       message);
        return;
    case SL_SNAPSHOT_DROP_CLIENT_INVALID:
        (void)snprintf(out, cap,
                       "client %s is refused by the proxy's validation (%s): it is left out",
                       subject, message);
        return;
    case SL_SNAPSHOT_DROP_GIT:
        (void)snprintf(out, cap, "sandbox %s gets no git access: %s", subject, message);
        return;
    }
    (void)snprintf(out, cap, "left out of the snapshot");
}

json_t *sl_snapshot_build_report_problems(const struct sl_snapshot_build_report *r)
{
    json_t *arr = json_array();

    for (size_t i = 0; arr != NULL && i < r->n_drops; i++) {
        const struct sl_snapshot_drop *d = &r->drops[i];
        bool client = d->kind == SL_SNAPSHOT_DROP_CLIENT
                      || d->kind == SL_SNAPSHOT_DROP_CLIENT_INVALID
                      || d->kind == SL_SNAPSHOT_DROP_GIT;
        char text[768];
        json_t *item;

        drop_text(d, text, sizeof(text));
        item = json_pack("{s:s, s:s, s:s}", "environment", d->env_id, "name",
                         d->env_name != NULL ? d->env_name : "", "message", text);
        if (item != NULL && client && d->subject != NULL
            && json_object_set_new(item, "client", json_string(d->subject)) < 0) {
            json_decref(item);
            item = NULL;
        }
        if (item == NULL || json_array_append_new(arr, item) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    return arr;
}

/* Checks `doc`, a document of one environment (and, for a client, one client), with the
 * proxy's parser. Returns 0 when it takes it, 1 with its first error ("path: message", the path
 * relative to `prefix` when it starts with it) in `why` when it does not, or SL_ENOMEM. */
static int check_alone(json_t *doc, const char *prefix, char *why, size_t cap)
{
    struct sl_policy_errors errs = { 0 };
    struct sl_snapshot *snap = NULL;
    char *text = json_dumps(doc, JSON_COMPACT);
    const char *path;
    int rc;

    SL_ENSURE(text != NULL, SL_ENOMEM);
    rc = sl_snapshot_parse(text, strlen(text), &snap, &errs);
    sodium_memzero(text, strlen(text));
    sl_free(text);
    sl_snapshot_unref(snap);
    if (rc == SL_EPOLICY && errs.count > 0) {
        path = errs.items[0].path;
        if (strncmp(path, prefix, strlen(prefix)) == 0) {
            path += strlen(prefix);
            path += *path == '.';
        }
        (void)snprintf(why, cap, "%s%s%s", path, path[0] != '\0' ? ": " : "",
                       errs.items[0].message);
        rc = 1;
    } else if (rc == SL_EPOLICY) {
        (void)snprintf(why, cap, "invalid");
        rc = 1;
    }
    sl_policy_errors_finish(&errs);
    return rc;
}

/* Opens `sealed` into a new JSON string in `*out`. Returns 0, 1 when it does not open (the key
 * changed or the text is damaged: SL_EINVAL or SL_ECRYPTO from control/store/secrets), or a
 * negative error. The scratch copy of the plaintext is wiped either way. */
static int open_value(struct build *b, const char *sealed, json_t **out)
{
    int rc = sl_secrets_open(b->sec, sealed, strlen(sealed), &b->plain);

    *out = NULL;
    if (rc == SL_EINVAL || rc == SL_ECRYPTO) {
        return 1;
    }
    SL_TRY(rc);
    /* The plaintext authenticated, so it is what the API sealed: valid UTF-8. NULL can only be
     * an allocation failure. */
    *out = json_stringn((const char *)b->plain.p, b->plain.len);
    sodium_memzero(b->plain.p, b->plain.len);
    sl_buf_reset(&b->plain);
    return *out != NULL ? 0 : SL_ENOMEM;
}

/* Adds `value` (a new reference, stolen even on failure) as `key` of `obj`. */
static int set_new(json_t *obj, const char *key, json_t *value)
{
    return json_object_set_new(obj, key, value) == 0 ? 0 : SL_ENOMEM;
}

static int append_new(json_t *arr, json_t *value)
{
    return json_array_append_new(arr, value) == 0 ? 0 : SL_ENOMEM;
}

/* True when `r` is a stored rule as control/env/environment writes it:
 * {"host", "methods": [strings], "credential"?: {"header", "sealed"}, "tls"?: "passthrough"}. */
static bool stored_rule_ok(json_t *r)
{
    json_t *methods = json_object_get(r, "methods");
    json_t *c = json_object_get(r, "credential");
    size_t i;
    json_t *m;

    if (!json_is_string(json_object_get(r, "host")) || !json_is_array(methods)) {
        return false;
    }
    json_array_foreach(methods, i, m)
    {
        if (!json_is_string(m)) {
            return false;
        }
    }
    if (json_object_get(r, "tls") != NULL
        && (!json_is_string(json_object_get(r, "tls"))
            || strcmp(json_string_value(json_object_get(r, "tls")), "passthrough") != 0
            || json_array_size(methods) > 0 || c != NULL)) {
        return false;
    }
    return c == NULL
           || (json_is_string(json_object_get(c, "header"))
               && json_is_string(json_object_get(c, "sealed"))
               && (json_object_get(c, "placeholder_env") == NULL
                   || json_is_string(json_object_get(c, "placeholder_env"))));
}

/* Parses a stored egress_json (NULL gives NULL) and checks its shape. Returns the document (a
 * new reference) or NULL when it is missing or damaged; `*oom` tells an allocation failure
 * apart. */
static json_t *load_egress(const char *egress_json, bool *oom)
{
    json_error_t err;
    json_t *doc;
    json_t *rules;
    const char *def;
    size_t i;
    json_t *r;

    *oom = false;
    if (egress_json == NULL) {
        return NULL;
    }
    doc = json_loads(egress_json, JSON_REJECT_DUPLICATES, &err);
    if (doc == NULL) {
        *oom = json_error_code(&err) == json_error_out_of_memory;
        return NULL;
    }
    def = json_string_value(json_object_get(doc, "default"));
    rules = json_object_get(doc, "rules");
    if (def == NULL || (strcmp(def, "deny") != 0 && strcmp(def, "allow") != 0)
        || !json_is_array(rules)) {
        goto fail_damaged;
    }
    json_array_foreach(rules, i, r)
    {
        if (!stored_rule_ok(r)) {
            goto fail_damaged;
        }
    }
    return doc;
fail_damaged:
    json_decref(doc);
    return NULL;
}

/* Compiles one stored rule into `rules`. Returns 0, or a negative error; a credential that does
 * not open leaves the whole rule out, logged and reported. */
static int compile_rule(struct build *b, const struct sl_env_row *row, json_t *stored,
                        json_t *rules)
{
    const char *host = json_string_value(json_object_get(stored, "host"));
    json_t *methods = json_object_get(stored, "methods");
    json_t *c = json_object_get(stored, "credential");
    json_t *value = NULL;
    json_t *rule;
    char name[LOG_NAME_MAX + 1];
    int rc = 0;

    if (c != NULL) {
        rc = open_value(b, json_string_value(json_object_get(c, "sealed")), &value);
        SL_TRY(rc);
    }
    if (rc == 1) {
        log_name(row->name, name);
        sl_log(SL_LOG_WARN, 0,
               "msg=\"credential does not open (encryption key changed?): rule left out of the "
               "snapshot\" env=%s env_name=\"%s\" host=%s",
               row->id, name, host);
        return add_drop(b, SL_SNAPSHOT_DROP_RULE, row->id, row->name, host, NULL);
    }
    rule = json_pack("{s:s}", "host", host);
    rc = rule != NULL ? append_new(rules, rule) : SL_ENOMEM;
    if (rc == 0 && json_array_size(methods) > 0) {
        rc = set_new(rule, "methods", json_copy(methods));
    }
    if (rc == 0 && json_object_get(stored, "tls") != NULL) {
        rc = set_new(rule, "tls", json_string("passthrough"));
    }
    if (rc == 0 && value != NULL) {
        rc = set_new(
                rule, "credential",
                json_pack("{s:O, s:o}", "header", json_object_get(c, "header"), "value", value));
        value = NULL; /* json_pack's "o" steals it, even on failure. */
        b->report->n_credentials++;
        if (rc == 0 && json_object_get(c, "placeholder_env") != NULL) {
            rc = set_new(json_object_get(rule, "credential"), "placeholder_env",
                         json_incref(json_object_get(c, "placeholder_env")));
        }
    }
    json_decref(value);
    b->report->n_rules++;
    return rc;
}

/* Puts the environment `env` in observe until `until` (learn mode, snapshot.md §3) and notes
 * the deadline for the next build. */
static int set_observe(struct build *b, json_t *env, int64_t until)
{
    char text[32];
    time_t t = (time_t)until;
    struct tm tm;

    if (gmtime_r(&t, &tm) == NULL || strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        return SL_EINVAL;
    }
    if (b->report->next_observe_end == 0 || until < b->report->next_observe_end) {
        b->report->next_observe_end = until;
    }
    return set_new(env, "observe_until", json_string(text));
}

/* Fills `env` (the environment's object in the document) from `row`. Returns 0, or a negative
 * error; damage is reported and compiles as deny-all. */
static int fill_env(struct build *b, const struct sl_env_row *row, json_t *env)
{
    json_t *stored = NULL;
    char name[LOG_NAME_MAX + 1];
    bool oom = false;
    size_t i;
    json_t *r;
    int rc;

    if (!row->network) {
        return 0; /* Nothing leaves it but a client's runtime rules; observe neither. */
    }
    stored = load_egress(row->egress_json, &oom);
    SL_ENSURE(!oom, SL_ENOMEM);
    if (stored == NULL) {
        log_name(row->name, name);
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"stored egress policy missing or damaged: environment compiled as deny "
               "with no rules\" env=%s env_name=\"%s\"",
               row->id, name);
        return add_drop(b, SL_SNAPSHOT_DROP_EGRESS, row->id, row->name, NULL, NULL);
    }
    rc = set_new(env, "default", json_incref(json_object_get(stored, "default")));
    if (rc == 0 && row->observe_until > b->now) {
        rc = set_observe(b, env, row->observe_until);
    }
    json_array_foreach(json_object_get(stored, "rules"), i, r)
    {
        if (rc == 0) {
            rc = compile_rule(b, row, r, json_object_get(env, "rules"));
        }
    }
    json_decref(stored);
    return rc;
}

/* A new environment object: deny-all, with its name as label when it can be one. */
static json_t *deny_env(const struct sl_env_row *row)
{
    json_t *env = json_pack("{s:s, s:[]}", "default", "deny", "rules");

    /* Keyed by id, labelled by name: refusals and their hints name the environment as people
     * know it ("add {...} to environment ci-python"). */
    if (env != NULL && row->name != NULL && sl_policy_label_ok(row->name, strlen(row->name))
        && set_new(env, "label", json_string(row->name)) < 0) {
        json_decref(env);
        env = NULL;
    }
    return env;
}

/* Checks the environment `env` alone with the proxy's parser: 0 when it takes it, 1 with the
 * reason in `why` when not. */
static int check_env(const char *id, json_t *env, char *why, size_t cap)
{
    char prefix[SL_UUID_LEN + 32];
    json_t *doc = json_pack("{s:i, s:{s:O}}", "version", 1, "environments", id, env);
    int rc;

    SL_ENSURE(doc != NULL, SL_ENOMEM);
    (void)snprintf(prefix, sizeof(prefix), "$.environments.%s", id);
    rc = check_alone(doc, prefix, why, cap);
    json_decref(doc);
    return rc;
}

/* Adds the environment `row` to the document, keyed by its id. One the proxy would refuse is
 * compiled as deny-all instead (or, when even that is refused, left out), and reported. */
static int compile_env(struct build *b, const struct sl_env_row *row)
{
    struct sl_snapshot_build_report before = *b->report;
    json_t *env = deny_env(row);
    char name[LOG_NAME_MAX + 1];
    char why[SL_POLICY_PATH_MAX + SL_POLICY_MESSAGE_MAX + 8];
    char safe[sizeof(why)];
    int rc;

    SL_ENSURE(env != NULL, SL_ENOMEM);
    SL_TRY(set_new(b->envs, row->id, env));
    b->report->n_envs++;
    SL_TRY(fill_env(b, row, env));
    rc = b->check_each ? check_env(row->id, env, why, sizeof(why)) : 0;
    if (rc <= 0) {
        return rc;
    }
    /* Refused: what it compiled does not count, nor go out. */
    b->report->n_rules = before.n_rules;
    b->report->n_credentials = before.n_credentials;
    log_name(row->name, name);
    log_text(why, safe, sizeof(safe));
    sl_log(SL_LOG_ERROR, 0,
           "msg=\"stored environment refused by the proxy's validation: compiled as deny with "
           "no rules\" env=%s env_name=\"%s\" err=\"%s\"",
           row->id, name, safe);
    SL_TRY(add_drop(b, SL_SNAPSHOT_DROP_ENV_INVALID, row->id, row->name, NULL, why));
    env = deny_env(row);
    SL_ENSURE(env != NULL, SL_ENOMEM);
    SL_TRY(set_new(b->envs, row->id, env));
    rc = check_env(row->id, env, why, sizeof(why));
    if (rc == 1) {
        /* Even deny-all is refused: its key cannot name an environment. Its clients go to
         * the offline one or are left out. */
        SL_ENSURE(json_object_del(b->envs, row->id) == 0, SL_ENOMEM);
        b->report->n_envs--;
        rc = 0;
    }
    return rc;
}

/* Sets `key` to the string `s` unless it is NULL. */
static int set_optional(json_t *obj, const char *key, const char *s)
{
    if (s == NULL) {
        return 0;
    }
    return set_new(obj, key, json_string(s));
}

/*
 * Adds `entry` (a client object; stolen) to the document unless the proxy would refuse it on
 * its own, or its id is taken, or its environment is not in the document: then it is left out,
 * logged and reported (under `env_id`, `env_name`), and the counts it added since `before` are
 * taken back.
 */
static int admit_client(struct build *b, json_t *entry, const char *env_id, const char *env_name,
                        const struct sl_snapshot_build_report *before)
{
    const char *id = json_string_value(json_object_get(entry, "id"));
    const char *env = json_string_value(json_object_get(entry, "environment"));
    char why[SL_POLICY_PATH_MAX + SL_POLICY_MESSAGE_MAX + 8];
    char safe[sizeof(why)];
    json_t *doc;
    int rc = 1;

    if (id == NULL || env == NULL) {
        json_decref(entry);
        return SL_EINVAL;
    }
    if (json_object_get(b->ids, id) != NULL) {
        (void)snprintf(why, sizeof(why), "id: another client has the id %s", id);
    } else if (json_object_get(b->envs, env) == NULL) {
        (void)snprintf(why, sizeof(why), "environment: its environment is left out");
    } else if (!b->check_each) {
        rc = 0;
    } else {
        /* With its environment as compiled: its placeholders name that environment's
         * credentials. */
        doc = json_pack("{s:i, s:{s:O}, s:[O]}", "version", 1, "environments", env,
                        json_object_get(b->envs, env), "clients", entry);
        rc = doc != NULL ? check_alone(doc, "$.clients[0]", why, sizeof(why)) : SL_ENOMEM;
        json_decref(doc);
    }
    if (rc == 0) {
        rc = set_new(b->ids, id, json_true());
        if (rc == 0) {
            b->report->n_clients++;
            return append_new(b->clients, entry);
        }
    }
    if (rc < 0) {
        json_decref(entry);
        return rc;
    }
    b->report->n_rules = before->n_rules;
    b->report->n_credentials = before->n_credentials;
    log_text(why, safe, sizeof(safe));
    sl_log(SL_LOG_ERROR, 0,
           "msg=\"client refused by the proxy's validation: left out of the snapshot\" client=%s "
           "env=%s err=\"%s\"",
           id, env_id, safe);
    rc = add_drop(b, SL_SNAPSHOT_DROP_CLIENT_INVALID, env_id, env_name, id, why);
    json_decref(entry);
    return rc;
}

/* Adds a static client; one whose token does not open, or that the proxy would refuse, is left
 * out, logged and reported. */
static int compile_static_client(struct build *b, const struct sl_store_client *c)
{
    struct sl_snapshot_build_report before = *b->report;
    const char *env_name = c->env_name != NULL ? c->env_name : "";
    json_t *token = NULL;
    json_t *entry;
    int rc = 0;

    if (c->token_sealed != NULL) {
        rc = open_value(b, c->token_sealed, &token);
        SL_TRY(rc);
    }
    if (rc == 1) {
        sl_log(SL_LOG_WARN, 0,
               "msg=\"client token does not open (encryption key changed?): client left out "
               "of the snapshot\" client=%s env=%s",
               c->id, c->env_id);
        return add_drop(b, SL_SNAPSHOT_DROP_CLIENT, c->env_id, env_name, c->id, NULL);
    }
    entry = json_pack("{s:s, s:s}", "id", c->id, "environment", c->env_id);
    rc = entry != NULL ? 0 : SL_ENOMEM;
    if (rc == 0 && token != NULL) {
        rc = set_new(entry, "token", token);
        token = NULL;
    }
    json_decref(token);
    if (rc == 0) {
        rc = set_optional(entry, "ip", c->ip);
    }
    if (rc == 0) {
        rc = set_optional(entry, "cidr", c->cidr);
    }
    if (rc < 0) {
        json_decref(entry);
        return rc;
    }
    return admit_client(b, entry, c->env_id, env_name, &before);
}

static int compile_extra_rule(struct build *b, const struct sl_snapshot_build_rule *r,
                              json_t *rules)
{
    json_t *rule = json_pack("{s:s}", "host", r->host);
    json_t *methods = NULL;
    int rc = rule != NULL ? append_new(rules, rule) : SL_ENOMEM;

    if (rc == 0 && r->n_methods > 0) {
        methods = json_array();
        rc = set_new(rule, "methods", methods);
    }
    for (size_t i = 0; rc == 0 && i < r->n_methods; i++) {
        rc = append_new(methods, json_string(r->methods[i]));
    }
    if (rc == 0 && r->header != NULL) {
        rc = set_new(rule, "credential",
                     json_pack("{s:s, s:s}", "header", r->header, "value", r->value));
        b->report->n_credentials++;
    }
    b->report->n_rules++;
    return rc;
}

/* Checks what the proxy's parser cannot say clearly about an extra entry. */
static int check_extra_client(struct build *b, const struct sl_snapshot_build_client *c)
{
    const char *why = NULL;

    (void)b;
    if (c->id == NULL || c->env_id == NULL) {
        why = "an extra client without id or environment";
    }
    for (size_t i = 0; why == NULL && i < c->n_rules; i++) {
        if (c->rules[i].host == NULL
            || (c->rules[i].header == NULL) != (c->rules[i].value == NULL)) {
            why = "an extra client has a rule without host or with half a credential";
        }
    }
    if (why == NULL) {
        return 0;
    }
    sl_log(SL_LOG_ERROR, 0, "msg=\"%s: snapshot not built\" client=%s env=%s", why,
           c->id != NULL ? c->id : "-", c->env_id != NULL ? c->env_id : "-");
    return SL_EINVAL;
}

/* The environment an extra client is compiled with: its own, or the offline one (added to the
 * document on first use) when it names SL_SNAPSHOT_OFFLINE_ENV or an environment that is gone
 * (deleted while its sandbox runs): that client then reaches nothing but its runtime rules. */
static int extra_env(struct build *b, const struct sl_snapshot_build_client *c, const char **env)
{
    json_t *offline;

    if (strcmp(c->env_id, SL_SNAPSHOT_OFFLINE_ENV) != 0) {
        if (json_object_get(b->envs, c->env_id) != NULL) {
            *env = c->env_id;
            return 0;
        }
        sl_log(SL_LOG_WARN, 0,
               "msg=\"an extra client's environment is gone; it gets no egress but its own "
               "rules\" client=%s env=%s",
               c->id, c->env_id);
    }
    *env = SL_SNAPSHOT_OFFLINE_ENV;
    if (json_object_get(b->envs, SL_SNAPSHOT_OFFLINE_ENV) != NULL) {
        return 0;
    }
    offline = json_pack("{s:s, s:[]}", "default", "deny", "rules");
    return offline != NULL ? set_new(b->envs, SL_SNAPSHOT_OFFLINE_ENV, offline) : SL_ENOMEM;
}

/* The `git` object of an extra client. */
static json_t *git_json(const struct sl_snapshot_build_git *g)
{
    json_t *protected = json_array();
    json_t *git;

    for (size_t i = 0; protected != NULL && i < g->n_protected; i++) {
        if (json_array_append_new(protected, json_string(g->protected_branches[i])) < 0) {
            json_decref(protected);
            protected = NULL;
        }
    }
    if (protected == NULL) {
        return NULL;
    }
    git = json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s}, s:s, s:o}", "host", g->host, "base_path",
                    g->base_path, "repo", g->repo, "access", g->access, "credential", "header",
                    g->header, "value", g->value, "default_branch", g->default_branch,
                    "protected_branches", protected);
    return git;
}

/* Does a credential of `rules` (a compiled rule array) name `env` as its placeholder_env? */
static bool names_placeholder(json_t *rules, const char *env)
{
    size_t i;
    json_t *r;

    json_array_foreach(rules, i, r)
    {
        const char *named = json_string_value(
                json_object_get(json_object_get(r, "credential"), "placeholder_env"));

        if (named != NULL && strcmp(named, env) == 0) {
            return true;
        }
    }
    return false;
}

/* The client's `placeholders`: those its environment (`env`, as compiled) still names. */
static int compile_placeholders(const struct sl_snapshot_build_client *c, json_t *env,
                                json_t *entry)
{
    json_t *obj = NULL;
    int rc = 0;

    for (size_t i = 0; rc == 0 && i < c->n_placeholders; i++) {
        const struct sl_snapshot_build_placeholder *ph = &c->placeholders[i];

        if (ph->env == NULL || ph->value == NULL
            || !names_placeholder(json_object_get(env, "rules"), ph->env)) {
            continue;
        }
        if (obj == NULL) {
            obj = json_object();
            rc = set_new(entry, "placeholders", obj);
        }
        if (rc == 0) {
            rc = set_new(obj, ph->env, json_string(ph->value));
        }
    }
    return rc;
}

static int compile_extra_client(struct build *b, const struct sl_snapshot_build_client *c)
{
    struct sl_snapshot_build_report before = *b->report;
    json_t *entry;
    json_t *rules = NULL;
    const char *env = NULL;
    json_t *env_row;
    const char *env_name;
    int rc;

    SL_TRY(check_extra_client(b, c));
    SL_TRY(extra_env(b, c, &env));
    env_row = json_object_get(b->envs, env);
    env_name = json_string_value(json_object_get(env_row, "label"));
    env_name = env_name != NULL ? env_name : "";
    if (c->problem != NULL) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"a sandbox gets no git access\" client=%s env=%s", c->id,
               env);
        SL_TRY(add_drop(b, SL_SNAPSHOT_DROP_GIT, env, env_name, c->id, c->problem));
    }
    entry = json_pack("{s:s, s:s}", "id", c->id, "environment", env);
    rc = entry != NULL ? 0 : SL_ENOMEM;
    if (rc == 0) {
        rc = set_optional(entry, "token", c->token);
    }
    if (rc == 0) {
        rc = set_optional(entry, "ip", c->ip);
    }
    if (rc == 0) {
        rc = set_optional(entry, "cidr", c->cidr);
    }
    if (rc == 0) {
        rc = set_optional(entry, "expires_at", c->expires_at);
    }
    if (rc == 0 && c->n_rules > 0) {
        rules = json_array();
        rc = set_new(entry, "rules", rules);
    }
    for (size_t i = 0; rc == 0 && i < c->n_rules; i++) {
        rc = compile_extra_rule(b, &c->rules[i], rules);
    }
    if (rc == 0 && c->git != NULL) {
        rc = set_new(entry, "git", git_json(c->git));
        b->report->n_credentials++;
    }
    if (rc == 0) {
        rc = compile_placeholders(c, env_row, entry);
    }
    if (rc < 0) {
        json_decref(entry);
        return rc;
    }
    return admit_client(b, entry, env, env_name, &before);
}

struct dump {
    /* The caller's buffer, borrowed. */
    struct sl_buf *out;
    /* The first append's failure: SL_ETOOBIG (past the cap) or SL_ENOMEM. */
    int rc;
};

static int on_dump(const char *s, size_t n, void *arg)
{
    struct dump *d = arg;

    d->rc = sl_buf_append(d->out, s, n);
    return d->rc == 0 ? 0 : -1;
}

/* Serialises the document into `out` and has the proxy's parser check it. A refusal is logged
 * only when `last` (the first pass's is not an error: the second pass finds the part). */
static int dump_and_check(json_t *doc, struct sl_buf *out, bool last)
{
    struct sl_policy_errors errs = { 0 };
    struct sl_snapshot *snap = NULL;
    struct dump d = { .out = out, .rc = 0 };
    int rc;

    if (json_dump_callback(doc, on_dump, &d, JSON_COMPACT) != 0) {
        rc = d.rc != 0 ? d.rc : SL_ENOMEM;
        sl_log(SL_LOG_ERROR, 0, "msg=\"snapshot not built\" err=%s cap_bytes=%zu", sl_strerror(rc),
               out->_max);
        return rc;
    }
    rc = sl_snapshot_parse(out->p, out->len, &snap, &errs);
    sl_snapshot_unref(snap);
    for (size_t i = 0; last && rc == SL_EPOLICY && i < errs.count; i++) {
        /* The parser's paths and messages never contain a credential value or a token. */
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"compiled snapshot refused by the proxy's validation: not built\" "
               "path=\"%s\" err=\"%s\"",
               errs.items[i].path, errs.items[i].message);
    }
    sl_policy_errors_finish(&errs);
    return rc;
}

/* The database may hold more than the proxy accepts only if it was changed behind the API. */
static int check_counts(size_t n_envs, size_t n_clients)
{
    if (n_envs <= SL_POLICY_ENVS_MAX && n_clients <= SL_POLICY_CLIENTS_MAX) {
        return 0;
    }
    sl_log(SL_LOG_ERROR, 0,
           "msg=\"more environments or clients than the proxy accepts: snapshot not built\" "
           "environments=%zu clients=%zu max_environments=%d max_clients=%d",
           n_envs, n_clients, SL_POLICY_ENVS_MAX, SL_POLICY_CLIENTS_MAX);
    return SL_ETOOBIG;
}

/* The port of a rule's `host` in normal form (`name:PORT`, `[v6]:PORT`), 0 when it has none. */
static unsigned host_port(const char *host)
{
    const char *colon;
    unsigned long port = 0;

    if (host == NULL) {
        return 0;
    }
    if (host[0] == '[') {
        const char *end = strchr(host, ']');

        colon = end != NULL && end[1] == ':' ? end + 1 : NULL;
    } else {
        colon = strrchr(host, ':');
    }
    if (colon == NULL || colon[1] == '\0' || strspn(colon + 1, "0123456789") != strlen(colon + 1)
        || strlen(colon + 1) > 5) {
        return 0;
    }
    port = strtoul(colon + 1, NULL, 10);
    return port <= 65535 ? (unsigned)port : 0;
}

static void note_rule_ports(const json_t *rules, uint8_t *ports)
{
    size_t i;
    const json_t *r;

    json_array_foreach(rules, i, r)
    {
        unsigned p = host_port(json_string_value(json_object_get(r, "host")));

        if (p != 0) {
            ports[p / 8] = (uint8_t)(ports[p / 8] | (1u << (p % 8)));
        }
    }
}

/* Fills report->named_ports from the finished document. */
static void note_named_ports(json_t *doc, struct sl_snapshot_build_report *report)
{
    json_t *envs = json_object_get(doc, "environments");
    const char *key;
    json_t *v;
    size_t i;

    memset(report->named_ports, 0, sizeof(report->named_ports));
    json_object_foreach(envs, key, v)
    {
        note_rule_ports(json_object_get(v, "rules"), report->named_ports);
    }
    json_array_foreach(json_object_get(doc, "clients"), i, v)
    {
        note_rule_ports(json_object_get(v, "rules"), report->named_ports);
    }
}

/* Fills `doc` from the rows and the extra entries. */
static int compile_all(struct build *b, const struct sl_env_row *envs, size_t n_envs,
                       const struct sl_store_client *clients, size_t n_clients,
                       const struct sl_snapshot_build_client *extra, size_t n_extra)
{
    int rc = check_counts(n_envs, n_clients + n_extra);

    for (size_t i = 0; rc == 0 && i < n_envs; i++) {
        rc = compile_env(b, &envs[i]);
    }
    for (size_t i = 0; rc == 0 && i < n_clients; i++) {
        rc = compile_static_client(b, &clients[i]);
    }
    for (size_t i = 0; rc == 0 && i < n_extra; i++) {
        rc = compile_extra_client(b, &extra[i]);
    }
    return rc;
}

/* One pass: a new document in `*doc` (owned by the caller) from the rows, serialised into `out`
 * and checked whole with the proxy's parser. */
static int build_pass(struct build *b, int64_t version, const struct sl_env_row *envs,
                      size_t n_envs, const struct sl_store_client *clients, size_t n_clients,
                      const struct sl_snapshot_build_client *extra, size_t n_extra,
                      struct sl_buf *out, json_t **doc)
{
    int rc;

    sl_buf_reset(out);
    sl_snapshot_build_report_finish(b->report);
    json_decref(b->ids);
    b->ids = json_object();
    *doc = json_pack("{s:I, s:{}, s:[]}", "version", (json_int_t)version, "environments",
                     "clients");
    SL_ENSURE(*doc != NULL && b->ids != NULL, SL_ENOMEM);
    b->envs = json_object_get(*doc, "environments");
    b->clients = json_object_get(*doc, "clients");
    rc = compile_all(b, envs, n_envs, clients, n_clients, extra, n_extra);
    if (rc == 0) {
        rc = dump_and_check(*doc, out, b->check_each);
    }
    return rc;
}

int sl_control_snapshot_build_with_clients(struct sl_store *st, const struct sl_secrets *sec,
                                           int64_t version,
                                           const struct sl_snapshot_build_client *extra,
                                           size_t n_extra, struct sl_buf *out,
                                           struct sl_snapshot_build_report *report)
{
    struct sl_snapshot_build_report local = { 0 };
    struct build b = { .sec = sec, .report = report != NULL ? report : &local };
    struct sl_env_row *envs = NULL;
    struct sl_store_client *clients = NULL;
    size_t n_envs = 0;
    size_t n_clients = 0;
    json_t *doc = NULL;
    int rc;

    sl_buf_reset(out);
    sl_snapshot_build_report_finish(b.report);
    SL_ENSURE(version >= 1, SL_EINVAL);
    b.now = (int64_t)time(NULL);
    sl_buf_init(&b.plain, PLAIN_MAX);
    rc = sl_store_env_list_all(st, &envs, &n_envs);
    if (rc == 0) {
        rc = sl_store_client_list(st, &clients, &n_clients);
    }
    if (rc == 0) {
        /* The whole document checked once: what every build of sound rows needs. */
        rc = build_pass(&b, version, envs, n_envs, clients, n_clients, extra, n_extra, out, &doc);
    }
    if (rc == SL_EPOLICY) {
        /* Something in it is refused: again, each part checked on its own as it is compiled,
         * so that only what is refused is left out or shut (the top of snapshot.h). */
        sl_log(SL_LOG_DEBUG, 0,
               "msg=\"the snapshot was refused whole: compiling it again part by part\"");
        if (out->p != NULL) {
            sodium_memzero(out->p, out->len);
        }
        json_decref(doc);
        doc = NULL;
        b.check_each = true;
        rc = build_pass(&b, version, envs, n_envs, clients, n_clients, extra, n_extra, out, &doc);
    }
    if (rc == 0) {
        note_named_ports(doc, b.report);
    }
    json_decref(doc);
    json_decref(b.ids);
    sl_store_free_clients(clients, n_clients);
    sl_store_free_envs(envs, n_envs);
    sl_buf_finish(&b.plain);
    if (rc != 0) {
        if (out->p != NULL) {
            sodium_memzero(out->p, out->len);
        }
        sl_buf_reset(out);
        sl_snapshot_build_report_finish(b.report);
    }
    sl_snapshot_build_report_finish(&local);
    return rc;
}

int sl_control_snapshot_build(struct sl_store *st, const struct sl_secrets *sec, int64_t version,
                              struct sl_buf *out, struct sl_snapshot_build_report *report)
{
    return sl_control_snapshot_build_with_clients(st, sec, version, NULL, 0, out, report);
}
